"""Class-data sharing for the driver and executor JVMs: Spark's classes parsed and verified once, when the
image is built, and mapped from an archive by every driver and executor after that.

A driver's JVM loads some 12,000 classes before its first batch; with an application class-data archive
(JDK 13+ dynamic CDS) it maps them instead. Measured on 2 cores: a local SparkSession plus its first job in
3.4 s instead of 6.2 to 7.2 s, and a streaming query's first batch about 4 s sooner, on every start,
recovery and promotion alike.

An archive is valid only for the exact classpath it was made with (the same jars, sizes and times, in the same
order) and the same JVM. So each archive is named by a key over everything that decides the driver's
classpath: `spark.driver.extraClassPath` (S3A's jars, and task-local recovery's jar when the job uses it),
Spark's own jars, the conf directories and the java binary. A driver whose classpath has no archive (a user's
own image, their own extraClassPath) starts as before; an archive the JVM finds stale anyway is ignored with
a warning on the driver's stderr, never an error.

    python -m ftspark.runtime.classdata --jars-dir DIR [--with-jar JAR]   # the archive for that classpath

An executor's archive (`--executor`) is made the same way, by an executor JVM that the image's entrypoint
starts beside a local cluster's driver and that takes some of its tasks; the entrypoint maps it into every
executor whose classpath it was made for (without the pod's working directory, empty when the JVM starts).
Measured on 2 cores: an executor registered 1.6 s sooner (1.8-2.2 s from its start instead of 3.5-3.7).

The Spark image runs it at build time, for the classpath without and with the local-recovery jar: the drivers'
archives before ftspark itself is installed (this module needs nothing but pyspark, so a new ftspark reuses
their layer), the executors' after it (the entrypoint is ftspark's). `make test` does the same for the
development machine's classpath, under `${FTSPARK_CACHE:-~/.cache/ftspark}/class-data`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

IMAGE_DIR = Path("/opt/ftspark/class-data")  # images/spark-py/Dockerfile
CLASS_DATA_DIR = "FTSPARK_CLASS_DATA_DIR"
KEPT = 6  # archives a directory keeps (the newest): a few checkouts or venvs worth
# The launcher's inputs to the driver's classpath besides extraClassPath and SPARK_HOME (Spark's
# AbstractCommandBuilder.buildClassPath).
_CLASSPATH_ENV = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")


def spark_home(env: Mapping[str, str] = os.environ) -> str:
    """SPARK_HOME as pyspark's launcher finds it: as set (the image's /opt/spark), else pyspark's own."""
    return env.get("SPARK_HOME") or str(_pyspark_dir())


def _pyspark_dir() -> Path:
    """pyspark's package directory, imported only when asked: the executor's entrypoint reads this module
    and must not pay for pyspark's import on every executor start."""
    import pyspark  # noqa: PLC0415

    return Path(pyspark.__file__).parent


def extra_classpath(jars_dir: Path | str, *more: str) -> str:
    """S3A's jars (and ours) for extraClassPath, which comes before Spark's own jars. The AWS SDK bundle
    carries unshaded SLF4J 1.x classes: first on the path, they shadow Spark's SLF4J 2 binding and every
    Spark log line is dropped. Spark's own slf4j-api goes first."""
    spark_jars = _pyspark_dir() / "jars"
    return ":".join(
        [*map(str, sorted(spark_jars.glob("slf4j-api-*.jar"))), f"{jars_dir}/*", *filter(None, more)]
    )


def archive_dir(env: Mapping[str, str], image_dir: Path = IMAGE_DIR) -> Path:
    """Where archives are: as set, else in the Spark image, else in the development cache."""
    if env.get(CLASS_DATA_DIR):
        return Path(env[CLASS_DATA_DIR])
    if image_dir.is_dir():
        return image_dir
    return Path(env.get("FTSPARK_CACHE") or Path.home() / ".cache" / "ftspark") / "class-data"


def _files(entry: str) -> list[str]:
    """A classpath entry as the files it names, each with its size and modification time."""
    path = Path(entry.removesuffix("*"))
    files = sorted(path.glob("*.jar")) if entry.endswith("*") else [path]
    return [f"{file}:{stat.st_size}:{stat.st_mtime_ns}" for file in files if (stat := _stat(file))]


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _java(env: Mapping[str, str]) -> str:
    java = f"{env['JAVA_HOME']}/bin/java" if env.get("JAVA_HOME") else shutil.which("java") or "java"
    return os.path.realpath(java)


def archive_key(extra_classpath: str, spark_home: str, env: Mapping[str, str]) -> str:
    parts = [entry for item in extra_classpath.split(":") if item for entry in _files(item)]
    parts += _files(f"{spark_home}/jars/*")
    parts += [f"{name}={env.get(name, '')}" for name in _CLASSPATH_ENV]
    parts += _files(_java(env))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def archive_for(extra_classpath: str, spark_home: str, env: Mapping[str, str]) -> Path:
    return archive_dir(env) / f"driver-{archive_key(extra_classpath, spark_home, env)}.jsa"


def driver_java_options(extra_classpath: str, spark_home: str, env: Mapping[str, str], own: str) -> str:
    """spark.driver.extraJavaOptions: the archive for this classpath if there is one, then the job's own
    options (which come last, so that they win)."""
    archive = archive_for(extra_classpath, spark_home, env)
    if not archive.is_file():
        return own
    return " ".join(filter(None, [f"-XX:SharedArchiveFile={archive}", own]))


def executor_archive(classpath: str, env: Mapping[str, str]) -> Path:
    """The executor JVM's archive for this classpath: the entrypoint's without the pod's working directory,
    which is empty when the JVM starts (the JVM maps an archive made with another empty one there)."""
    parts = [entry for item in classpath.split(":") if item for entry in _files(item)]
    key = hashlib.sha256("\n".join([*parts, *_files(_java(env))]).encode()).hexdigest()[:20]
    return archive_dir(env) / f"executor-{key}.jsa"


# -- making an archive --------------------------------------------------------------------------------------

# What a driver runs before its first checkpoint: a file source, a windowed aggregation with a watermark
# (state), a file sink with its checkpoint, two batches. The classes a job loads beyond these are loaded as
# before. The JVM writes the archive as it exits: the workload ends it (stdin closed, as when a driver's
# Python ends) and waits for it.
_WORKLOAD = """
import json, sys, tempfile
from pathlib import Path
from pyspark import SparkContext
from pyspark.sql import SparkSession, functions as F

work = Path(tempfile.mkdtemp())
(work / "in").mkdir()
builder = SparkSession.builder
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
session = builder.getOrCreate()
session.sparkContext.setLogLevel("ERROR")
executor = None
if len(sys.argv) > 2:  # an executor JVM as the image's entrypoint starts one, beside local-cluster's own
    import os, subprocess, time
    from ftspark.runtime.entrypoint import executor_argv
    context = session.sparkContext
    port = context.getConf().get("spark.driver.port")
    env = {
        **os.environ, **json.loads(sys.argv[2]), "SPARK_APPLICATION_ID": context.applicationId,
        "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
    }
    executor = subprocess.Popen(executor_argv(env, tempfile.mkdtemp()), env=env)
    while env["SPARK_EXECUTOR_ID"] not in context._jsc.sc().getExecutorIds().toString():
        if executor.poll() is not None:
            sys.exit(f"the executor ended ({executor.returncode}) before it registered")
        time.sleep(0.1)
for batch in range(2):
    rows = "".join(json.dumps({"k": i % 7, "v": 10 * batch + i}) + "\\n" for i in range(50))
    (work / "in" / f"{batch}.json").write_text(rows)
    (
        session.readStream.schema("k INT, v INT").json(str(work / "in"))
        .withColumn("t", F.timestamp_seconds("v")).withWatermark("t", "10 seconds")
        .groupBy(F.window("t", "5 seconds"), "k").count()
        .writeStream.outputMode("append").format("parquet").option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True).start()
        .awaitTermination()
    )
jvm = SparkContext._gateway.proc
session.stop()
if executor is not None:  # the driver's stop ends it
    sys.exit(executor.wait(timeout=300))
jvm.stdin.close()
sys.exit(jvm.wait(timeout=300))
"""


def make_archive(extra: str, env: Mapping[str, str]) -> Path:
    """Runs the workload in a driver JVM that writes its loaded classes to the archive for this
    extraClassPath as it exits; the archive appears under its name only once whole."""
    archive = archive_for(extra, spark_home(env), env)
    return _dumped(archive, env, lambda partial: ({"spark.driver.extraClassPath": extra, **_LOCAL}, None))


def make_executor_archive(extra: str, env: Mapping[str, str]) -> Path:
    """The same workload on a local cluster, beside which an executor JVM started by the image's entrypoint
    (spark.executor.extraClassPath = extra) takes tasks and writes its archive as it exits. Needs ftspark
    installed: the entrypoint builds the executor's command."""
    from ftspark.runtime.entrypoint import executor_classpath  # noqa: PLC0415 - not at the image's first use

    executor_env = {"SPARK_HOME": spark_home(env), "SPARK_CLASSPATH": extra, **_EXECUTOR_POD_ENV}
    archive = executor_archive(":".join(executor_classpath({**env, **executor_env}, "")), env)

    def settings(partial: Path) -> tuple[dict[str, str], dict[str, str]]:
        local_cluster = {**_LOCAL, "spark.master": "local-cluster[1,1,1024]"}
        return local_cluster, {**executor_env, "SPARK_JAVA_OPT_0": f"-XX:ArchiveClassesAtExit={partial}"}

    return _dumped(archive, env, settings)


# What Spark's Kubernetes backend sets on an executor pod besides its driver's address and application.
_EXECUTOR_POD_ENV = {
    "SPARK_EXECUTOR_ID": "77",  # numbers: Spark parses them
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "class-data",
    "SPARK_EXECUTOR_MEMORY": "512m",
}
_LOCAL = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def _dumped(
    archive: Path,
    env: Mapping[str, str],
    settings: Callable[[Path], tuple[dict[str, str], dict[str, str] | None]],
) -> Path:
    """archive, made unless it is there: settings(partial) gives the workload's Spark settings and the
    environment of an executor to start beside it (None: the driver's JVM writes partial)."""
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive.parent) as scratch:
        partial = Path(scratch) / archive.name
        spark, executor = settings(partial)
        if executor is None:
            spark = {**spark, "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial}"}
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                _WORKLOAD,
                json.dumps(spark),
                *([json.dumps(executor)] if executor else []),
            ],
            # Loopback only: a build container's hostname may not resolve.
            env={**env, "SPARK_LOCAL_HOSTNAME": "localhost", "SPARK_LOCAL_IP": "127.0.0.1"},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if run.returncode != 0 or not partial.is_file():
            raise RuntimeError(
                f"no class-data archive was written (exit {run.returncode}):\n{run.stderr[-4000:]}"
            )
        partial.chmod(0o644)
        partial.rename(archive)
    _prune(archive.parent)
    return archive


def _prune(directory: Path) -> None:
    """A development cache gains two archives (about 160 MiB each) with every new venv or jar: only the
    newest KEPT stay (a few checkouts' worth); the others' jars are gone or will not be used again."""
    archives = sorted(directory.glob("*.jsa"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in archives[KEPT:]:
        old.unlink(missing_ok=True)


def _check(jars_dir: str, jar: str, *, executor: bool) -> str | None:
    """What the runtime gives a driver (or the entrypoint an executor) with these jars: an image whose
    archives they would not find starts every JVM without them, silently."""
    from ftspark.protocol import DriverEnv  # noqa: PLC0415 - the installed runtime, unlike the rest
    from ftspark.runtime.entrypoint import executor_argv  # noqa: PLC0415
    from ftspark.runtime.session import DRIVER_JAVA_OPTIONS, spark_settings  # noqa: PLC0415

    env = {**os.environ, DriverEnv.LOCAL_RECOVERY_JAR: jar}
    settings = spark_settings({}, tempfile.gettempdir(), Path(jars_dir), env)
    if executor:
        pod = {"SPARK_HOME": spark_home(env), "SPARK_CLASSPATH": settings["spark.executor.extraClassPath"]}
        pod |= {**_EXECUTOR_POD_ENV, "SPARK_DRIVER_URL": "-", "SPARK_APPLICATION_ID": "-"}
        options = " ".join(arg for arg in executor_argv({**env, **pod}, "/") if arg.startswith("-XX:"))
    else:
        options = settings.get(DRIVER_JAVA_OPTIONS, "")
    if "-XX:SharedArchiveFile=" not in options:
        return f"ftspark class data: no archive for {jars_dir} {jar} in {archive_dir(env)}"
    print(f"the {'executors' if executor else 'drivers'} start with {options}")
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ftspark.runtime.classdata", description=__doc__)
    parser.add_argument(
        "--jars-dir", required=True, help="the S3A jars (the driver's FTSPARK_SPARK_JARS_DIR)"
    )
    parser.add_argument("--with-jar", default="", help="a jar after them (the local-recovery jar)")
    parser.add_argument(
        "--executor", action="store_true", help="the executor JVM's archive (needs ftspark installed)"
    )
    parser.add_argument(
        "--check", action="store_true", help="make nothing; fail unless the runtime finds the archive"
    )
    args = parser.parse_args(argv)
    if args.check:
        sys.exit(_check(args.jars_dir, args.with_jar, executor=args.executor))
    make = make_executor_archive if args.executor else make_archive
    try:
        archive = make(extra_classpath(args.jars_dir, args.with_jar), os.environ)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        sys.exit(f"ftspark class data: {error}")
    print(f"{archive} ({archive.stat().st_size // 2**20} MiB)")


if __name__ == "__main__":
    main()
