"""Development and test tooling for ftspark: a local Kubernetes control plane and an S3 server.

Never shipped in the operator package; the test suite, `make dev-cluster` and `make demo` use it.
"""
