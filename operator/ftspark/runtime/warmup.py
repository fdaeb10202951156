"""A standby's executors warmed while it waits (docs/hot-standby.md, "Warm executors").

A promoted standby's first batch ran on executors that had never run a task: about 9 s of a 16.8 s takeover
went to their JVMs loading and compiling the task path, generating and compiling code, and starting S3A.
Run before the kill, that work is off the takeover's path. What runs writes nothing of the job's: a few
micro-batches of a streaming windowed count over generated rows (its checkpoint in the driver's /tmp, its
state and shuffle files on the executors' local disks) and a read of one object of the job's storage,
through S3A, on an executor.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, window
from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

ROWS_PER_SECOND = 20_000
# Batch 0 creates the state, batch 1 loads it back: the path a promoted driver's first batch takes.
STREAM_BATCHES = 3
STREAM_SECONDS = 60.0


def warm_up(spark: SparkSession, sample: str | None, until: threading.Event) -> float | None:
    """Seconds it took, None when until was set first (the standby's promotion: what is left of the warm-up
    would only delay it). sample: a small object's URI to read on an executor (None: no S3A read). A failure
    is logged, never raised: a cold standby still saves the session's start."""
    started = time.monotonic()
    try:
        _stream(spark, until)
        if until.is_set():
            return None
        if sample is not None:
            spark.read.text(sample).collect()
    except (Py4JError, PySparkException, TimeoutError) as error:
        log.warning("standing by: the executors' warm-up failed (they start cold): %s", error)
    return time.monotonic() - started


def _stream(spark: SparkSession, until: threading.Event) -> None:
    """A few micro-batches of a streaming windowed count, shuffled by key on every core: the micro-batch
    engine on the driver, the state store's save and load (its files under the executors' /tmp, never the
    job's storage), the aggregation's generated code. Its checkpoint is the driver's /tmp, deleted after; it
    stops early once until is set."""
    checkpoint = tempfile.mkdtemp(prefix="ftspark-warm-up-")
    try:
        rows = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", ROWS_PER_SECOND)
            .option("numPartitions", spark.sparkContext.defaultParallelism)
            .load()
        )
        counts = (
            rows.withWatermark("timestamp", "10 seconds")
            .groupBy(window("timestamp", "10 seconds"), (col("value") % 97).alias("key"))
            .count()
        )
        query = (
            counts.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", checkpoint)
            .queryName("ftspark-warm-up")
            .start()
        )
        try:
            deadline = time.monotonic() + STREAM_SECONDS
            while _batches(query) < STREAM_BATCHES and not until.wait(0.1):
                if not query.isActive or time.monotonic() > deadline:
                    raise TimeoutError(f"{_batches(query)} of {STREAM_BATCHES} warm-up batches ran")
        finally:
            query.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def _batches(query: StreamingQuery) -> int:
    """Batches the query has completed (Spark numbers them from 0)."""
    progress = query.lastProgress
    return 0 if progress is None else int(progress["batchId"]) + 1
