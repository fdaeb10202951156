"""The driver JVM gets the class-data archive made for exactly its classpath, or none."""

from __future__ import annotations

import ast
from pathlib import Path

from ftspark.runtime import classdata
from ftspark.runtime.classdata import CLASS_DATA_DIR, archive_for, driver_java_options
from ftspark.runtime.session import DRIVER_JAVA_OPTIONS, spark_settings


def _machine(tmp_path: Path) -> tuple[str, str, dict[str, str]]:
    """A Spark home, an S3A jars dir and a java, as files: the key reads names, sizes and times only."""
    for jar in ("spark/jars/spark-core.jar", "spark/jars/slf4j-api-2.0.jar", "s3a/hadoop-aws.jar"):
        (tmp_path / jar).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / jar).write_text(jar)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("jvm")
    env = {CLASS_DATA_DIR: str(tmp_path / "class-data"), "JAVA_HOME": str(tmp_path / "jdk")}
    return f"{tmp_path}/s3a/*", str(tmp_path / "spark"), env


def _make(archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"archive")


def test_the_archive_for_the_classpath_comes_before_the_jobs_own_options(tmp_path: Path) -> None:
    classpath, home, env = _machine(tmp_path)
    assert driver_java_options(classpath, home, env, "-Xss4m") == "-Xss4m", "no archive: as the job says"
    _make(archive := archive_for(classpath, home, env))
    assert driver_java_options(classpath, home, env, "-Xss4m") == f"-XX:SharedArchiveFile={archive} -Xss4m"
    assert driver_java_options(classpath, home, env, "") == f"-XX:SharedArchiveFile={archive}"


def test_another_classpath_or_a_changed_jar_or_java_has_no_archive(tmp_path: Path) -> None:
    classpath, home, env = _machine(tmp_path)
    _make(archive := archive_for(classpath, home, env))
    assert archive_for(f"{classpath}:{tmp_path}/s3a/hadoop-aws.jar", home, env) != archive
    assert archive_for(classpath, home, {**env, "SPARK_CONF_DIR": "/etc/spark"}) != archive
    (tmp_path / "s3a" / "hadoop-aws.jar").write_text("a rebuilt jar")
    assert archive_for(classpath, home, env) != archive, "a jar of the classpath changed"
    changed = archive_for(classpath, home, env)
    (tmp_path / "jdk" / "bin" / "java").write_text("an upgraded jvm")
    assert archive_for(classpath, home, env) != changed, "the JVM changed"


def test_the_session_settings_carry_it_for_the_drivers_classpath(tmp_path: Path) -> None:
    _, home, env = _machine(tmp_path)
    env = {**env, "SPARK_HOME": home}
    settings = spark_settings({}, "/checkpoints", tmp_path / "s3a", env)
    assert DRIVER_JAVA_OPTIONS not in settings
    _make(archive := archive_for(settings["spark.driver.extraClassPath"], home, env))
    own = {DRIVER_JAVA_OPTIONS: "-Dmine=1"}
    settings = spark_settings(own, "/checkpoints", tmp_path / "s3a", env)
    assert settings[DRIVER_JAVA_OPTIONS] == f"-XX:SharedArchiveFile={archive} -Dmine=1"


def test_the_module_imports_neither_ftspark_nor_pyspark_at_its_top() -> None:
    """The Spark image runs it by path before ftspark is installed (images/spark-py/Dockerfile): a
    module-level import of ftspark fails the image build (its --check imports the installed runtime later).
    And every executor's entrypoint reads it: pyspark's import would add to each executor's start."""
    tree = ast.parse(Path(classdata.__file__).read_text())
    imported = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] in ("ftspark", "pyspark")}, imported
    assert "pyspark" in Path(classdata.__file__).read_text(), "this test reads the module it names"
