"""A standby's executors warmed while it waits (docs/hot-standby.md, "Warm executors").

A promoted standby's first batch ran on executors that had never run a task: about 9 s of a 16.8 s takeover
went to their JVMs loading and compiling the task path, generating and compiling code, and starting S3A.
Run before the kill, that work is off the takeover's path. What runs writes nothing of the job's: a hash
aggregation over generated rows (its shuffle files stay on the executors' local disks) and a read of one
object of the job's storage, through S3A, on an executor.
"""

from __future__ import annotations

import logging
import time

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, window

log = logging.getLogger(__name__)

ROWS = 20_000


def warm_up(spark: SparkSession, sample: str | None) -> float:
    """Seconds it took. sample: a small object's URI to read on an executor (None: no S3A read). A failure
    is logged, never raised: a cold standby still saves the session's start."""
    started = time.monotonic()
    try:
        # The shape of a streaming aggregation's batch: a windowed count, shuffled by key, on every core.
        rows = spark.range(0, ROWS, 1, spark.sparkContext.defaultParallelism)
        windowed = rows.select(
            (col("id") % 97).alias("key"), col("id").cast("timestamp").alias("time")
        ).groupBy(window("time", "10 seconds"), "key")
        windowed.count().collect()
        if sample is not None:
            spark.read.text(sample).collect()
    except (Py4JError, PySparkException) as error:
        log.warning("standing by: the executors' warm-up failed (they start cold): %s", error)
    return time.monotonic() - started
