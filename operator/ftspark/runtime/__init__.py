"""The driver runtime (docs/driver-runtime.md): runs inside the driver pod and gives an unmodified PySpark
Structured Streaming script Flink's guarantees — a fenced driver Lease, checkpoint pointers per committed
micro-batch, stop with a final checkpoint, savepoints, rollback of a damaged checkpoint, and a termination
message.

Entry point: ``python -m ftspark.runtime driver <mainApplicationFile> [args...]`` (see driver.py).
"""
