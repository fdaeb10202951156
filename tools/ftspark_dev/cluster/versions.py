"""Versions the project pins, each read from the one place it is pinned, so that no copy drifts: the Spark
lines are spark-lines.txt's rows, the default first (tools/spark_line.sh reads them for the builds), and the
default line's pyspark is constraints.txt's, which the development venv runs."""

from __future__ import annotations

from dataclasses import dataclass

from ftspark_dev.cluster.processes import REPO_ROOT


def pinned(package: str) -> str:
    """The version constraints.txt pins a Python package at."""
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        name, pinned_at, version = line.partition("==")
        if pinned_at and name.strip().lower() == package:
            return version.split(";")[0].strip()
    raise LookupError(f"{package} is not pinned in constraints.txt")


@dataclass(frozen=True)
class SparkLine:
    """One row of spark-lines.txt."""

    line: str
    pyspark: str
    hadoop: str
    aws_sdk: str
    slf4j: str
    analytics: str | None  # the S3 analytics accelerator S3A needs from Hadoop 3.5 on


def spark_lines() -> list[SparkLine]:
    rows = (line.split() for line in (REPO_ROOT / "spark-lines.txt").read_text().splitlines())
    return [
        SparkLine(line, pyspark, hadoop, aws_sdk, slf4j, None if analytics == "-" else analytics)
        for line, pyspark, hadoop, aws_sdk, slf4j, analytics in (
            row for row in rows if row and row[0][0] != "#"
        )
    ]


DEFAULT_LINE, *_, OTHER_LINE = spark_lines()
SPARK_VERSION = DEFAULT_LINE.pyspark
SPARK_IMAGE = f"ftspark/spark-py:{SPARK_VERSION}"
# docs/own-image.md's image on the other line: that line's Spark with the runtime layered on (tools/images).
OWN_IMAGE = f"ftspark/own-image:{OTHER_LINE.pyspark}"
