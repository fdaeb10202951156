"""A stateful Structured Streaming job of another shape than windowed_counts.py: session windows, emitted once
each, when the watermark closes them (append mode). Written as any PySpark user would (nothing ftspark-specific).

    sessions.py <input dir> <output dir>

Input: text files of lines `<record id>,<key>,<event time in epoch seconds>`, one file per micro-batch, in event
time order. A session of a key is a run of its events less than 7 s apart; it closes once the watermark (the
newest event time seen, less 5 s) passes its end. Its state (the open sessions) is carried across batches.
Output: foreachBatch writes the sessions a batch closed as a JSON list of [key, start, end, events] to
`<output dir>/batch-<id>.json` (replaced as a whole if the batch runs again, so the sink is idempotent), and a
marker `<output dir>/runs/<id>-<random>` per invocation.
"""

import json
import os
import sys
import uuid

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

source, target = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(target, "runs"), exist_ok=True)
spark = SparkSession.builder.appName("sessions").getOrCreate()

events = (
    spark.readStream.option("maxFilesPerTrigger", 1)
    .text(source)
    .select(F.split("value", ",").alias("f"))
    .select(
        F.col("f")[1].alias("key"),
        F.col("f")[2].cast("long").cast("timestamp").alias("time"),
    )
    .withWatermark("time", "5 seconds")
)
sessions = events.groupBy(F.session_window("time", "7 seconds"), "key").count()


def write_batch(batch, batch_id):
    rows = sorted(
        [
            r["key"],
            int(r["session_window"].start.timestamp()),
            int(r["session_window"].end.timestamp()),
            r["count"],
        ]
        for r in batch.collect()
    )
    final = os.path.join(target, f"batch-{batch_id}.json")
    with open(final + ".tmp", "w") as out:
        json.dump(rows, out)
    os.replace(final + ".tmp", final)
    open(os.path.join(target, "runs", f"{batch_id}-{uuid.uuid4().hex}"), "w").close()


query = (
    sessions.writeStream.outputMode("append")
    .foreachBatch(write_batch)
    .trigger(processingTime="200 milliseconds")
    .start()
)
query.awaitTermination()
