"""Adapters on the Kubernetes API."""
