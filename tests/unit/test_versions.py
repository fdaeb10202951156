"""The Spark line is pinned once (constraints.txt's pyspark): every place a user reads or a build uses names
that one, and the S3A jars are those of the Hadoop that pyspark bundles."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark

from ftspark.runtime.config import DEV_JARS_DIR_NAME
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.versions import SPARK_IMAGE, SPARK_VERSION


def test_every_spark_image_named_is_the_pinned_one() -> None:
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
    assert named, "the examples name the Spark image"
    assert {tag for _, tag in named} == {SPARK_VERSION}, sorted(named)
    assert f"ftspark/spark-py:{pyspark.__version__}" == SPARK_IMAGE, "the venv runs the pinned Spark"


def test_the_s3a_jars_are_for_the_hadoop_pyspark_bundles() -> None:
    pom = (REPO_ROOT / "jvm" / "s3a-deps" / "pom.xml").read_text()
    [hadoop] = re.findall(r"<hadoop.version>([^<]+)</hadoop.version>", pom)
    [aws_sdk] = re.findall(r"<aws.sdk.version>([^<]+)</aws.sdk.version>", pom)
    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{hadoop}.jar").is_file(), f"pyspark bundles no Hadoop {hadoop}"
    # The local-recovery jar is compiled against the same Hadoop and slf4j (provided: pyspark's at run time).
    local_recovery = (REPO_ROOT / "jvm" / "local-recovery" / "pom.xml").read_text()
    assert re.findall(r"<hadoop.version>([^<]+)</hadoop.version>", local_recovery) == [hadoop]
    [slf4j] = re.findall(r"<slf4j.version>([^<]+)</slf4j.version>", local_recovery)
    assert (jars / f"slf4j-api-{slf4j}.jar").is_file(), f"pyspark bundles no slf4j {slf4j}"
    # Where a development driver looks for them: the directory tools/spark_jars.sh names after the pom.
    assert f"hadoop-aws-{hadoop}-awssdk-{aws_sdk}" == DEV_JARS_DIR_NAME
