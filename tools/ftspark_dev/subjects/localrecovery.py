"""One node's life of a stateful streaming job with task-local recovery (jvm/local-recovery), for the tests in
tests/localrecovery/ and the measurement in localrecovery_bench.

`run_job(spec)` starts a fresh PySpark driver (local master: the executors live in the driver's JVM) as a
child process: a new JVM, so Spark's RocksDB provider has to restore its state from the checkpoint, which is
the recovery path the wrapper accelerates. The child processes what is new in the input folder (trigger
availableNow) and writes a result file: the wrapper's counters, the bytes S3A read, and when the first batch
committed.

Input files hold lines `<first id>,<count>`; Spark expands each into the ids first..first+count-1. The query
groups by `id % keys` and keeps count(*) and sum(id) per group, plus, for the measurement, max() of a
`payload_bytes` long pseudo-random string (the state's bulk).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ftspark.domain.models import StateStoreSpec
from ftspark.manifests import LOCAL_RECOVERY_KEY_BYTES, local_recovery_conf
from ftspark.runtime.classdata import driver_java_options, extra_classpath, spark_home
from ftspark.runtime.session import DRIVER_JAVA_OPTIONS
from ftspark_dev.cluster.s3server import spark_s3a_conf

KEYED_TOTALS = Path(__file__).resolve().parents[3] / "examples" / "keyed_totals.py"
TOOLS = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class JobSpec:
    endpoint: str  # the S3 server
    checkpoint: str  # s3a://bucket/prefix
    input: str  # local folder of range files
    result: str  # where the child writes its JSON result
    s3a_jars: str  # tools/spark_jars.sh
    jar: str  # tools/local_recovery_jar.sh
    local_dir: str | None  # the node-local dir; None: the wrapper as a pass-through (no local copies)
    keys: int
    key_file: str | None = None  # the job's MAC key (new_key); None: no copies either
    output: str | None = None  # folder for per-batch results; None: count the rows only
    changelog: bool = False
    payload_bytes: int = 0
    max_files_per_trigger: int = 1
    partitions: int = 2
    driver_memory: str = "1g"


def spark_conf(spec: JobSpec) -> dict[str, str]:
    classpath = extra_classpath(spec.s3a_jars, spec.jar)
    # The driver runtime's class data for the same classpath (make class-data), if there is one.
    java_options = driver_java_options(classpath, spark_home(), os.environ, "")
    conf = {
        "spark.master": "local[2]",
        "spark.driver.memory": spec.driver_memory,
        "spark.ui.enabled": "false",
        "spark.driver.extraClassPath": classpath,
        **({DRIVER_JAVA_OPTIONS: java_options} if java_options else {}),
        "spark.sql.shuffle.partitions": str(spec.partitions),
        # The settings a job's spec.stateStore makes.
        **StateStoreSpec(provider="rocksdb", changelog_checkpointing=spec.changelog).spark_conf(),
        **spark_s3a_conf(spec.endpoint),
        # Always the wrapper, so runs with and without copies upload alike: stock S3A uploads RocksDB's files
        # with the SDK's async client (which failed against moto, the first S3 server measured: HTTP 100
        # taken for the response); the wrapper uploads state files through create(). Without a local dir it
        # keeps no copies.
        **local_recovery_conf(spec.local_dir, spec.key_file),
    }
    return conf


def new_key(path: Path) -> str:
    """A job's random MAC key, as the operator's Secret holds it; returns the file's path."""
    path.write_bytes(os.urandom(LOCAL_RECOVERY_KEY_BYTES))
    return str(path)


def state_size_parser(description: str | None, *, keys: int, files: int) -> argparse.ArgumentParser:
    """The benchmarks' common arguments: how much state, loaded in how many batches."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=keys, help="distinct state keys")
    parser.add_argument("--payload", type=int, default=200, help="bytes of payload per key")
    parser.add_argument("--files", type=int, default=files, help="input files = batches of the load")
    return parser


def write_ranges(folder: Path, name: str, ranges: list[tuple[int, int]]) -> None:
    """One input file; staged and renamed, so the file source never sees half of it."""
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{name}"
    staged.write_text("".join(f"{first},{count}\n" for first, count in ranges))
    staged.rename(folder / name)


def expected_totals(ranges: list[tuple[int, int]], keys: int) -> dict[str, list[int]]:
    counts: Counter[int] = Counter()
    sums: Counter[int] = Counter()
    for first, count in ranges:
        for i in range(first, first + count):
            counts[i % keys] += 1
            sums[i % keys] += i
    return {str(key): [counts[key], sums[key]] for key in counts}


def totals(output: Path) -> dict[str, list[int]]:
    """Update mode: each batch holds the new totals of the groups it changed; later batches win."""
    merged: dict[str, list[int]] = {}
    for path in sorted(output.glob("batch-*.json"), key=lambda p: int(p.stem.removeprefix("batch-"))):
        merged.update(json.loads(path.read_text()))
    return merged


def run_job(spec: JobSpec, log: Path, timeout: float = 600) -> dict[str, Any]:
    """Runs the child driver to the end and returns its result. Its temporary files (Python's, the JVM's:
    Spark's local dirs) go beside its log, not to /tmp: a driver killed on purpose never removes its own."""
    scratch = log.parent / f"{log.stem}-tmp"
    scratch.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TOOLS), os.environ.get("PYTHONPATH")])),
        "PYSPARK_PYTHON": sys.executable,
    }
    with log.open("wb") as out:
        child = subprocess.Popen(
            # setpriv: the JVM dies with the test run that started it.
            [
                "setpriv",
                "--pdeathsig",
                "KILL",
                "--",
                sys.executable,
                "-m",
                "ftspark_dev.subjects.localrecovery",
            ],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        assert child.stdin is not None
        child.stdin.write(json.dumps(asdict(spec)).encode())
        child.stdin.close()
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise AssertionError(f"job still running after {timeout} s; log {log}") from None
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise AssertionError(f"job exited with {code}:\n{tail}")
    result: dict[str, Any] = json.loads(Path(spec.result).read_text())
    return result


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main() -> None:
    spec = JobSpec(**json.loads(sys.stdin.read()))
    started = time.time()
    builder = SparkSession.builder.appName("ftspark-local-recovery")
    for key, value in spark_conf(spec).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    session_ready = time.time()

    example = runpy.run_path(str(KEYED_TOTALS))
    grouped = example["keyed_totals"](
        spark, spec.input, spec.keys, spec.payload_bytes, spec.max_files_per_trigger
    )
    if spec.output is not None:
        Path(spec.output).mkdir(parents=True, exist_ok=True)
    sink = example["write_totals"](spec.output, totals=spec.output is not None)

    query_started = time.time()
    query = (
        grouped.writeStream.outputMode("update")
        .option("checkpointLocation", spec.checkpoint)
        .foreachBatch(sink)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    first_commit = None
    if progress:
        first_commit = _epoch(progress[0]["timestamp"]) + progress[0]["durationMs"]["triggerExecution"] / 1000
    jvm = spark._jvm
    assert jvm is not None
    # Hadoop's own per-scheme counters: every byte the S3A client read, state files or not.
    statistics = jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
    s3a_read = sum(s.getBytesRead() for s in statistics if s.getScheme() == "s3a")
    stats = json.loads(jvm.io.ftspark.localrecovery.LocalRecoveryStats.json())
    result = {
        "stats": stats,
        "s3aBytesRead": s3a_read,
        "sessionSeconds": session_ready - started,
        "firstCommitSeconds": None if first_commit is None else first_commit - query_started,
        "batches": [
            {
                "batchId": p["batchId"],
                "rows": p["numInputRows"],
                "durationMs": p["durationMs"],
                "state": [
                    {**op.get("customMetrics", {}), "rows": op["numRowsTotal"]} for op in p["stateOperators"]
                ],
            }
            for p in progress
        ],
    }
    Path(spec.result).write_text(json.dumps(result, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
