"""Whole installations on this machine: on process-backed nodes, on real kubelets, and for task-local
recovery."""
