"""What Spark's checkpoint asks of S3, and what that costs when S3 is some milliseconds away: the example's
windowed count (local PySpark, 2 state partitions, a file of input a second) with its checkpoint on the
loopback S3 server through S3A, once through Hadoop's FileContext binding (a job without ftspark's jar) and
once through ftspark's (docs/local-recovery.md, "Fewer requests per checkpoint file"). A delaying proxy in
front of the server holds each chunk `delay` ms each way. Requests are counted in the server's access log.

Each run is a new JVM: steady micro-batches, then restarts of the query (stop, two files of input, start).

    python -m ftspark_dev.benches.checkpoint_requests --delays 0,10 --batches 12 --restarts 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, functions

from ftspark.manifests import LOCAL_RECOVERY_AFS, LOCAL_RECOVERY_AFS_KEY, SNAPSHOT_CADENCE
from ftspark.runtime.classdata import extra_classpath
from ftspark_dev.cluster.processes import REPO_ROOT, built_by
from ftspark_dev.cluster.s3server import S3Server, spark_s3a_conf

HADOOP_BINDING = "org.apache.hadoop.fs.s3a.S3A"
BUCKET = "bench"


def delaying_proxy(target_port: int, delay_ms: float) -> int:
    """A TCP proxy on loopback that holds every chunk `delay_ms` before passing it on, both ways; its port."""
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await asyncio.sleep(delay_ms / 1000)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass  # the other side went away: so does this one
        finally:
            writer.close()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    async def listen() -> int:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port: int = server.sockets[0].getsockname()[1]
        return port

    port = loop.run_until_complete(listen())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return port


def _requests(access_log: Path, since: int) -> int:
    with access_log.open("rb") as log:
        log.seek(since)
        return len(log.read().splitlines())


def run(access_log: Path, endpoint: str, binding: str, batches: int, restarts: int) -> dict[str, Any]:
    """One JVM's steady batches and restarts through `binding`; the figures of each."""
    s3a_jars, jar = (
        built_by(REPO_ROOT / "tools" / "spark_jars.sh"),
        built_by(REPO_ROOT / "tools" / "local_recovery_jar.sh"),
    )
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.extraClassPath", extra_classpath(s3a_jars, str(jar)))
        .config(LOCAL_RECOVERY_AFS_KEY, binding)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
    )
    for key, value in {**SNAPSHOT_CADENCE, **spark_s3a_conf(endpoint)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    source, files = Path(tempfile.mkdtemp(prefix="ftspark-bench-input-")), [0]
    checkpoint = f"s3a://{BUCKET}/{binding.rsplit('.', 1)[-1]}-{os.getpid()}"

    def add_file() -> None:
        files[0] += 1
        hidden, final = source / f".{files[0]}", source / f"{files[0]:05d}.txt"
        now = int(time.time())
        hidden.write_text("".join(f"{files[0]}-{i},k{i % 7},{now}\n" for i in range(50)))
        os.replace(hidden, final)

    def start() -> Any:
        lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
        fields = lines.select(functions.split("value", ",").alias("f"))
        records = fields.select(
            functions.col("f")[1].alias("key"),
            functions.col("f")[2].cast("long").cast("timestamp").alias("t"),
        )
        counts = records.groupBy(functions.window("t", "10 seconds"), "key").count()
        writer = counts.writeStream.outputMode("update").foreachBatch(_collect)
        return (
            writer.option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start()
        )

    def next_batch(query: Any, after: int) -> dict[str, Any]:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            progress = query.lastProgress
            if progress and progress["batchId"] > after and progress["numInputRows"] > 0:
                return dict(progress)
            time.sleep(0.02)
        raise TimeoutError("no batch in 300 s")

    add_file()
    query = start()
    last = next_batch(query, -1)["batchId"]
    steady: list[tuple[int, int]] = []
    for _ in range(batches):
        time.sleep(1.0)
        since = access_log.stat().st_size
        add_file()
        progress = next_batch(query, last)
        last = progress["batchId"]
        time.sleep(0.3)  # the batch's last writes reach the log
        steady.append((progress["durationMs"]["triggerExecution"], _requests(access_log, since)))
    restarted: list[tuple[float, int, int]] = []
    for _ in range(restarts):
        query.stop()
        add_file()
        add_file()
        since, began = access_log.stat().st_size, time.monotonic()
        query = start()
        progress = next_batch(query, last)
        last = progress["batchId"]
        restarted.append(
            (
                time.monotonic() - began,
                progress["durationMs"]["triggerExecution"],
                _requests(access_log, since),
            )
        )
    query.stop()
    spark.stop()
    return {"steady": steady, "restarts": restarted}


def _collect(batch: DataFrame, _batch_id: int) -> None:
    batch.collect()


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--delays", default="0,10", help="ms each way, comma-separated")
    parser.add_argument("--batches", type=int, default=12, help="steady micro-batches a run")
    parser.add_argument("--restarts", type=int, default=3, help="restarts of the query a run")
    parser.add_argument("--child", nargs=3, metavar=("PORT", "BINDING", "ACCESS_LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one run in a JVM of its own, against the parent's server
        port, binding, access_log = args.child
        figures = run(Path(access_log), f"http://127.0.0.1:{port}", binding, args.batches, args.restarts)
        print("RESULT " + json.dumps(figures))
        return

    bindings = {"Hadoop's FileContext binding": HADOOP_BINDING, "ftspark's binding": LOCAL_RECOVERY_AFS}
    rows = []
    with S3Server() as s3:
        s3.client().create_bucket(Bucket=BUCKET)
        for delay in [float(d) for d in args.delays.split(",")]:
            port = delaying_proxy(s3.port, delay) if delay else s3.port
            for label, binding in bindings.items():
                child = [sys.executable, "-m", "ftspark_dev.benches.checkpoint_requests"]
                child += ["--batches", str(args.batches), "--restarts", str(args.restarts)]
                child += ["--child", str(port), binding, str(s3.access_log)]
                done = subprocess.run(child, capture_output=True, text=True, check=False)
                results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                if done.returncode != 0 or not results:
                    raise SystemExit(f"the run through {label} failed:\n{done.stderr[-4000:]}")
                figures = json.loads(results[-1].removeprefix("RESULT "))
                steady, restarts = figures["steady"], figures["restarts"]
                row = (
                    f"| {delay:g} ms | {label} | {_median([r for _, r in steady]):.0f} "
                    f"| {_median([ms for ms, _ in steady]) / 1000:.2f} s "
                    f"| {_median([r for _, _, r in restarts]):.0f} "
                    f"| {_median([ms for _, ms, _ in restarts]) / 1000:.2f} s "
                    f"| {_median([s for s, _, _ in restarts]):.2f} s |"
                )
                print(row, flush=True)
                rows.append(row)
    print(
        "\n| S3 delay each way | checkpoint through | requests a micro-batch | a steady micro-batch "
        "| requests of a restart to its first batch | that first batch "
        "| the query's start → that batch done |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
