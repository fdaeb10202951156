"""A small stateful Structured Streaming job, written as any PySpark user would (nothing ftspark-specific).

    windowed_counts.py <input dir> <output dir> [<checkpoint dir>]

Input: text files of lines `<record id>,<key>,<event time in epoch seconds>`, one file per micro-batch.
Output: counts per (10-second window, key) in update mode; foreachBatch writes one JSON object per batch id,
`<output dir>/batch-<id>.json` (replaced as a whole if the batch runs again, so the sink is idempotent), and
a marker `<output dir>/runs/<id>-<random>` per invocation, which shows how often a batch ran.

Under ftspark the query needs no checkpoint directory: the runtime gives it a stable one. Plain Spark gives an
unnamed query a new random directory on every start, so a plain run resumes only from one named here (make
bench's side-by-side recovery runs it that way).
"""

import json
import os
import sys
import uuid

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

source, target = sys.argv[1], sys.argv[2]
checkpoint = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(os.path.join(target, "runs"), exist_ok=True)
spark = SparkSession.builder.appName("windowed-counts").getOrCreate()

records = (
    spark.readStream.option("maxFilesPerTrigger", 1)
    .text(source)
    .select(F.split("value", ",").alias("f"))
    .select(
        F.col("f")[1].alias("key"),
        F.col("f")[2].cast("long").cast("timestamp").alias("time"),
    )
)
counts = records.groupBy(F.window("time", "10 seconds"), "key").count()


def write_batch(batch, batch_id):
    rows = {f"{r['window'].start.timestamp():.0f}/{r['key']}": r["count"] for r in batch.collect()}
    final = os.path.join(target, f"batch-{batch_id}.json")
    with open(final + ".tmp", "w") as out:
        json.dump(rows, out)
    os.replace(final + ".tmp", final)
    open(os.path.join(target, "runs", f"{batch_id}-{uuid.uuid4().hex}"), "w").close()


writer = counts.writeStream.outputMode("update").foreachBatch(write_batch)
if checkpoint is not None:
    writer = writer.option("checkpointLocation", checkpoint)
query = writer.trigger(processingTime="200 milliseconds").start()
query.awaitTermination()
