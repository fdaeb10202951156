"""What runs the subjects through a world: the fault tour, the soak, the recovery comparison, `make demo`."""
