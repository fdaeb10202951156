"""Versions the project pins, each read from the one place it is pinned, so that no copy drifts: the Spark
line is constraints.txt's pyspark (tools/images/build.sh tags the Spark image with it the same way)."""

from __future__ import annotations

from ftspark_dev.cluster.processes import REPO_ROOT


def pinned(package: str) -> str:
    """The version constraints.txt pins a Python package at."""
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        name, pinned_at, version = line.partition("==")
        if pinned_at and name.strip().lower() == package:
            return version.split(";")[0].strip()
    raise LookupError(f"{package} is not pinned in constraints.txt")


SPARK_VERSION = pinned("pyspark")
SPARK_IMAGE = f"ftspark/spark-py:{SPARK_VERSION}"
