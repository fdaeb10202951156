"""Operator leader election on a Lease (DESIGN §4, §5): one acting operator, fenced by its Epoch."""
