"""Wiring: configuration, the leader-only controller, and the process entry point."""
