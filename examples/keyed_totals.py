"""A stateful job with a lot of state, for task-local recovery (localRecovery, RocksDB state store):

    keyed_totals.py <input dir> <output dir> <keys> <payload bytes> [totals|count]

Input files hold lines `<first id>,<count>`; each expands into the ids first..first+count-1. Per `id % keys`
the job keeps count(*), sum(id) and max() of a `payload bytes` long pseudo-random string (the state's bulk).
Each micro-batch writes `<output dir>/batch-<id>.json`: the new totals of the groups it changed, or with
`count` only how many groups changed (for runs with millions of keys).
"""

import json
import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf


def keyed_totals(
    spark: SparkSession, source: str, keys: int, payload_bytes: int, files_per_batch: int
) -> DataFrame:
    ranges = (
        spark.readStream.schema("first LONG, count LONG")
        .option("maxFilesPerTrigger", files_per_batch)
        .csv(source)
    )
    ids = ranges.select(sf.explode(sf.sequence("first", sf.col("first") + sf.col("count") - 1)).alias("id"))
    aggregates = [sf.count(sf.lit(1)).alias("n"), sf.sum("id").alias("total")]
    if payload_bytes:
        # sha2 hex strings of the id: cheap to make, barely compressible by RocksDB's LZ4.
        parts = [
            sf.sha2(sf.concat(sf.col("id").cast("string"), sf.lit(f"/{i}")), 512)
            for i in range(payload_bytes // 128 + 1)
        ]
        ids = ids.withColumn("payload", sf.substring(sf.concat(*parts), 1, payload_bytes))
        aggregates.append(sf.max("payload").alias("payload"))
    return ids.groupBy((sf.col("id") % keys).alias("key")).agg(*aggregates)


def write_totals(output: str | None, totals: bool = True):
    """A foreachBatch sink; output None: it only runs the batch (counts its rows) and writes nothing."""

    def sink(batch: DataFrame, batch_id: int) -> None:
        if totals:
            rows = {str(row["key"]): [row["n"], row["total"]] for row in batch.collect()}
        else:
            rows = batch.count()
        if output is None:
            return
        final = os.path.join(output, f"batch-{batch_id}.json")
        with open(final + ".tmp", "w") as out:
            json.dump(rows, out)
        os.replace(final + ".tmp", final)

    return sink


if __name__ == "__main__":
    source, target, keys, payload = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    totals = (sys.argv[5] if len(sys.argv) > 5 else "totals") == "totals"
    os.makedirs(target, exist_ok=True)
    spark = SparkSession.builder.appName("keyed-totals").getOrCreate()
    query = (
        keyed_totals(spark, source, keys, payload, 1)
        .writeStream.outputMode("update")
        .foreachBatch(write_totals(target, totals))
        .trigger(processingTime="1 second")
        .start()
    )
    query.awaitTermination()
