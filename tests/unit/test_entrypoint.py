"""The Spark image's entrypoint against Spark's entrypoint.sh contract (the environment of executor pods)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from ftspark.runtime import entrypoint
from ftspark.runtime.classdata import CLASS_DATA_DIR, executor_archive
from ftspark.runtime.entrypoint import EXECUTOR_BACKEND, EntrypointError, executor_classpath, spark_argv

# What Spark's Kubernetes backend puts on an executor pod (BasicExecutorFeatureStep).
EXECUTOR_ENV = {
    "SPARK_HOME": "/opt/spark",
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@198.18.1.5:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_APPLICATION_ID": "ftspark-0a1b2c3d-1",
    "SPARK_EXECUTOR_POD_IP": "198.18.2.7",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "job-1-exec-3",
    "PATH": "/usr/bin",
}
CWD = "/home/spark"


def test_executor_runs_the_executor_backend_as_entrypoint_sh_does() -> None:
    assert spark_argv(["executor"], EXECUTOR_ENV, CWD) == [
        "/usr/lib/jvm/java-17/bin/java",
        "-Xms1024m",
        "-Xmx1024m",
        "-cp",
        "/opt/spark/conf:/opt/spark/jars/*:/home/spark",
        EXECUTOR_BACKEND,
        *("--driver-url", "spark://CoarseGrainedScheduler@198.18.1.5:7078"),
        *("--executor-id", "3"),
        *("--cores", "2"),
        *("--app-id", "ftspark-0a1b2c3d-1"),
        *("--hostname", "198.18.2.7"),
        *("--resourceProfileId", "0"),
        *("--podName", "job-1-exec-3"),
    ]


@pytest.mark.parametrize(
    ("env", "classpath"),
    [
        pytest.param(
            {"SPARK_CLASSPATH": "/opt/spark/jars/slf4j-api-2.0.16.jar:/opt/ftspark/jars/s3a/*"},
            "/opt/spark/conf:/opt/spark/jars/slf4j-api-2.0.16.jar:/opt/ftspark/jars/s3a/*:/opt/spark/jars/*"
            ":/home/spark",
            id="extraClassPath-before-spark-jars",
        ),
        pytest.param(
            {"SPARK_CONF_DIR": ""}, "/opt/spark/conf:/opt/spark/jars/*:/home/spark", id="conf-dir-from-home"
        ),
        pytest.param(
            {"SPARK_CONF_DIR": "/etc/spark"}, "/etc/spark:/opt/spark/jars/*:/home/spark", id="own-conf-dir"
        ),
        pytest.param(
            {
                "HADOOP_CONF_DIR": "/etc/hadoop",
                "SPARK_CLASSPATH": "/x/*",
                "SPARK_EXTRA_CLASSPATH": "/extra/*",
                "SPARK_DIST_CLASSPATH": "/dist/*",
            },
            "/opt/spark/conf:/etc/hadoop:/x/*:/opt/spark/jars/*:/extra/*:/home/spark:/dist/*",
            id="every-classpath-variable",
        ),
    ],
)
def test_executor_classpath(env: Mapping[str, str], classpath: str) -> None:
    argv = spark_argv(["executor"], {**EXECUTOR_ENV, **env}, CWD)
    assert argv[argv.index("-cp") + 1] == classpath


@pytest.mark.parametrize(
    ("env", "java_and_options"),
    [
        pytest.param({}, ["/usr/lib/jvm/java-17/bin/java"], id="no-options"),
        pytest.param(
            {
                "SPARK_JAVA_OPT_10": "-Dk=10",
                "SPARK_JAVA_OPT_2": "-Dk=2",
                "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
                "SPARK_JAVA_OPT_1": "-Dspark.driver.blockManager.port=7079",
                "SPARK_JAVA_OPT_X": "-Dnot=an-option",
            },
            [
                "/usr/lib/jvm/java-17/bin/java",
                "-Dspark.driver.port=7078",
                "-Dspark.driver.blockManager.port=7079",
                "-Dk=2",
                "-Dk=10",
            ],
            id="options-in-numeric-order",
        ),
        pytest.param({"JAVA_HOME": ""}, ["java"], id="java-from-path"),
    ],
)
def test_executor_java_and_options(env: Mapping[str, str], java_and_options: list[str]) -> None:
    argv = spark_argv(["executor", "ignored"], {**EXECUTOR_ENV, **env}, CWD)
    assert argv[: argv.index("-Xms1024m")] == java_and_options
    assert argv[-2:] == ["--podName", "job-1-exec-3"], "arguments after `executor` are ignored"


def test_executor_maps_the_archive_made_for_its_classpath_before_its_own_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's executor archive (runtime/classdata.py) is keyed by the classpath without the working
    directory: a pod's own (empty) one does not spoil it; another classpath finds none."""
    monkeypatch.setenv(CLASS_DATA_DIR, str(tmp_path))
    jars = tmp_path / "s3a"
    jars.mkdir()
    (jars / "hadoop-aws.jar").write_bytes(b"jar")
    env = {
        **EXECUTOR_ENV,
        CLASS_DATA_DIR: str(tmp_path),
        "SPARK_CLASSPATH": f"{jars}/*",
        "SPARK_JAVA_OPT_0": "-Dk=1",
    }
    assert not any(arg.startswith("-XX:SharedArchiveFile") for arg in spark_argv(["executor"], env, CWD))
    archive = executor_archive(":".join(executor_classpath(env, "")), env)
    archive.write_bytes(b"jsa")
    for cwd in (CWD, "/elsewhere"):
        argv = spark_argv(["executor"], env, cwd)
        assert argv[1:3] == [f"-XX:SharedArchiveFile={archive}", "-Dk=1"]
    (jars / "hadoop-aws.jar").write_bytes(b"another jar")
    assert not any(arg.startswith("-XX:SharedArchiveFile") for arg in spark_argv(["executor"], env, CWD))


@pytest.mark.parametrize(
    "name",
    [
        "SPARK_HOME",
        "SPARK_EXECUTOR_MEMORY",
        "SPARK_DRIVER_URL",
        "SPARK_EXECUTOR_ID",
        "SPARK_EXECUTOR_CORES",
        "SPARK_APPLICATION_ID",
        "SPARK_EXECUTOR_POD_IP",
        "SPARK_RESOURCE_PROFILE_ID",
        "SPARK_EXECUTOR_POD_NAME",
    ],
)
def test_executor_refuses_an_incomplete_environment(name: str) -> None:
    env = {k: v for k, v in EXECUTOR_ENV.items() if k != name}
    with pytest.raises(EntrypointError, match=name):
        spark_argv(["executor"], env, CWD)


def test_driver_is_spark_submit_in_client_mode() -> None:
    env = {"SPARK_HOME": "/opt/spark", "SPARK_DRIVER_BIND_ADDRESS": "198.18.1.5"}
    assert spark_argv(["driver", "--conf", "a=b", "local:///app.py", "x"], env, CWD) == [
        "/opt/spark/bin/spark-submit",
        *("--conf", "spark.driver.bindAddress=198.18.1.5"),
        *("--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=198.18.1.5"),
        *("--deploy-mode", "client"),
        *("--conf", "a=b", "local:///app.py", "x"),
    ]


@pytest.mark.parametrize(
    "args", [["python", "-m", "ftspark.runtime", "driver", "app.py"], ["sleep", "1"], []], ids=str
)
def test_anything_else_runs_as_given(args: list[str]) -> None:
    assert spark_argv(args, EXECUTOR_ENV, CWD) == args


def test_main_execs_the_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    execs: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(os, "execvp", lambda file, argv: execs.append((file, argv)))
    monkeypatch.setattr("sys.argv", ["entrypoint", "executor"])
    monkeypatch.setattr(os, "environ", EXECUTOR_ENV)
    monkeypatch.chdir("/")
    entrypoint.main()
    assert execs == [("/usr/lib/jvm/java-17/bin/java", spark_argv(["executor"], EXECUTOR_ENV, "/"))]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["entrypoint"], "usage"), (["entrypoint", "executor"], "SPARK_HOME is not set")],
)
def test_main_explains_what_it_cannot_run(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.setattr("sys.argv", argv)
    monkeypatch.setattr(os, "environ", {})
    with pytest.raises(SystemExit, match=message):
        entrypoint.main()
