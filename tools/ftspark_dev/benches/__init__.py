"""`make bench`: the operator's figures and task-local recovery's, printed as tables."""
