"""The Spark image's entrypoint (`tini -- python -m ftspark.runtime.entrypoint`): the contract of Spark's own
entrypoint.sh, on which Spark's Kubernetes backend relies, as one tested function. The process-backed nodes of
the test suite (ftspark_dev.nodes.images) run the same function.

- `executor`: Spark creates executor pods with no command, these args and everything else in the environment.
  The executor JVM gets the classpath entrypoint.sh builds: the conf dir, HADOOP_CONF_DIR, SPARK_CLASSPATH
  (spark.executor.extraClassPath, before Spark's own jars), $SPARK_HOME/jars/*, SPARK_EXTRA_CLASSPATH, the
  working directory (SPARK-43540), SPARK_DIST_CLASSPATH. Arguments after `executor` are ignored, as there.
- `driver …`: spark-submit in client mode, as cluster-mode submission's driver pod runs.
- anything else runs as given. The operator's driver pods set their own command
  (`python -m ftspark.runtime driver`), which replaces this entrypoint.

Left out: entrypoint.sh's nss_wrapper passwd entry for arbitrary uids (the image has a user for uid 185),
and its `hadoop classpath` call when HADOOP_HOME is set (pyspark bundles Hadoop's client: no HADOOP_HOME).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

from ftspark.runtime.classdata import executor_archive

EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
_JAVA_OPT = re.compile(r"SPARK_JAVA_OPT_(\d+)")
_EXECUTOR_ARGS = (
    ("--driver-url", "SPARK_DRIVER_URL"),
    ("--executor-id", "SPARK_EXECUTOR_ID"),
    ("--cores", "SPARK_EXECUTOR_CORES"),
    ("--app-id", "SPARK_APPLICATION_ID"),
    ("--hostname", "SPARK_EXECUTOR_POD_IP"),
    ("--resourceProfileId", "SPARK_RESOURCE_PROFILE_ID"),
    ("--podName", "SPARK_EXECUTOR_POD_NAME"),
)


class EntrypointError(Exception):
    """The environment lacks what Spark's Kubernetes backend always sets."""


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise EntrypointError(f"{name} is not set (Spark's Kubernetes backend sets it on its pods)")
    return value


def executor_classpath(env: Mapping[str, str], cwd: str) -> list[str]:
    """entrypoint.sh's executor classpath (cwd: the working directory; "" leaves it out)."""
    home = _required(env, "SPARK_HOME")
    classpath = (
        env.get("SPARK_CONF_DIR") or f"{home}/conf",
        env.get("HADOOP_CONF_DIR", ""),
        env.get("SPARK_CLASSPATH", ""),
        f"{home}/jars/*",
        env.get("SPARK_EXTRA_CLASSPATH", ""),
        cwd,
        env.get("SPARK_DIST_CLASSPATH", ""),
    )
    return [part for part in classpath if part]


def executor_argv(env: Mapping[str, str], cwd: str) -> list[str]:
    # Spark numbers its executor JVM options in order; entrypoint.sh's bash loop would put _10 before _2.
    numbered = sorted(
        (int(match.group(1)), value) for name, value in env.items() if (match := _JAVA_OPT.fullmatch(name))
    )
    # Class data shared from the image's archive for this classpath, if any (runtime/classdata.py): about
    # 1.6 s off the executor's start. The job's own options come after it, so that they win.
    archive = executor_archive(":".join(executor_classpath(env, "")), env)
    shared = [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []
    java_opts = [*shared, *(value for _, value in numbered)]
    classpath = executor_classpath(env, cwd)
    # Without JAVA_HOME entrypoint.sh asks the java on PATH for its home: that is the java on PATH.
    java = f"{env['JAVA_HOME']}/bin/java" if env.get("JAVA_HOME") else "java"
    memory = _required(env, "SPARK_EXECUTOR_MEMORY")
    return [
        java,
        *java_opts,
        f"-Xms{memory}",
        f"-Xmx{memory}",
        "-cp",
        ":".join(classpath),
        EXECUTOR_BACKEND,
        *(part for flag, name in _EXECUTOR_ARGS for part in (flag, _required(env, name))),
    ]


def driver_argv(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    bind = env.get("SPARK_DRIVER_BIND_ADDRESS", "")
    return [
        f"{_required(env, 'SPARK_HOME')}/bin/spark-submit",
        "--conf",
        f"spark.driver.bindAddress={bind}",
        "--conf",
        f"spark.executorEnv.SPARK_DRIVER_POD_IP={bind}",
        "--deploy-mode",
        "client",
        *args,
    ]


def spark_argv(args: Sequence[str], env: Mapping[str, str], cwd: str) -> list[str]:
    """What a container of the Spark image runs for these args (the pod's command is not set)."""
    if args and args[0] == "executor":
        return executor_argv(env, cwd)
    if args and args[0] == "driver":
        return driver_argv(args[1:], env)
    return list(args)


def main() -> None:
    try:
        argv = spark_argv(sys.argv[1:], os.environ, os.getcwd())
    except EntrypointError as error:
        sys.exit(f"ftspark entrypoint: {error}")
    if not argv:
        sys.exit("ftspark entrypoint: usage: executor | driver <spark-submit args> | <command> [args...]")
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
