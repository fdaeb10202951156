"""Adapters: the ports implemented on Kubernetes, S3 and in memory."""
