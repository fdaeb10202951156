"""observe → decide → act → record, one job at a time, from a work queue."""
