"""The Spark lines are pinned once (spark-lines.txt, the default first): every place a user reads or a build
uses names the default line's Spark, the development venv runs it, and its S3A and local-recovery jars are
for the Hadoop and slf4j that its pyspark bundles."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pyspark

from ftspark.runtime.config import DEV_JARS_DIR_NAME
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.versions import DEFAULT_LINE, SPARK_IMAGE, SPARK_VERSION, pinned, spark_lines


def test_every_spark_image_named_is_the_default_lines() -> None:
    pages = [
        *REPO_ROOT.glob("examples/*.yaml"),
        *REPO_ROOT.glob("docs/*.md"),
        REPO_ROOT / "README.md",
        REPO_ROOT / "images" / "spark-py" / "Dockerfile",
    ]
    named = {
        (page.relative_to(REPO_ROOT).as_posix(), tag)
        for page in pages
        for tag in re.findall(r"ftspark/spark-py:([0-9][\w.-]*)", page.read_text())
    }
    lines = {line.pyspark for line in spark_lines()}
    assert named, "the examples name the Spark image"
    # The examples and most pages name the default line; a page may show how to build another line's.
    assert SPARK_VERSION in {tag for _, tag in named} <= lines, sorted(named)
    examples = {tag for page, tag in named if page.startswith("examples/")}
    assert examples == {SPARK_VERSION}, sorted(named)
    assert pinned("pyspark") == SPARK_VERSION, "constraints.txt pins the default line's pyspark"
    assert f"ftspark/spark-py:{pyspark.__version__}" == SPARK_IMAGE, "the venv runs the default line's Spark"


def test_the_default_lines_jars_are_for_the_hadoop_and_slf4j_pyspark_bundles() -> None:
    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{DEFAULT_LINE.hadoop}.jar").is_file(), (
        f"pyspark bundles no Hadoop {DEFAULT_LINE.hadoop}"
    )
    assert (jars / f"slf4j-api-{DEFAULT_LINE.slf4j}.jar").is_file(), (
        f"pyspark bundles no slf4j {DEFAULT_LINE.slf4j}"
    )
    # Where a development driver looks for the S3A jars: the directory tools/spark_jars.sh names.
    assert f"hadoop-aws-{DEFAULT_LINE.hadoop}-awssdk-{DEFAULT_LINE.aws_sdk}" == DEV_JARS_DIR_NAME


def test_the_builds_read_each_lines_pins_from_the_same_rows() -> None:
    script = str(REPO_ROOT / "tools" / "spark_line.sh")

    def ask(*args: str) -> str:
        return subprocess.run([script, *args], check=True, capture_output=True, text=True).stdout.strip()

    assert ask("lines").split() == [line.line for line in spark_lines()]
    for line in spark_lines():
        assert ask("pyspark", line.line) == line.pyspark
        flags = (
            f"-Dhadoop.version={line.hadoop} -Daws.sdk.version={line.aws_sdk} -Dslf4j.version={line.slf4j}"
        )
        analytics = f" -Danalytics.version={line.analytics}" if line.analytics else ""
        assert ask("maven", line.line) == flags + analytics
    assert ask("pyspark") == SPARK_VERSION, "no line given: the default"
    unknown = subprocess.run([script, "pyspark", "3.9"], capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and "no Spark line '3.9'" in unknown.stderr
