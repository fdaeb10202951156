"""Operator leader election on a Lease: one acting operator, fenced by its Epoch (docs/architecture.md,
"One replica's life" and "Fencing")."""
