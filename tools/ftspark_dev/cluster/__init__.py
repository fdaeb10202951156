"""The local parts of an installation: child processes, a real control plane and its PKI, the S3 server,
network conditions, operator processes; `python -m ftspark_dev.cluster` is `make dev-cluster`."""
