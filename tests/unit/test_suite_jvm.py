"""The suite's JVMs compile with C1 only (ftspark_dev.pytest_plugins.jvm), the ones on process-backed nodes
too."""

from __future__ import annotations

import os
import subprocess

import pytest

from ftspark_dev.cluster.versions import SPARK_IMAGE
from ftspark_dev.nodes import images
from ftspark_dev.nodes.images import JVM_OPTIONS
from ftspark_dev.pytest_plugins.jvm import SUITE_JVM_OPTIONS


def _final_flag(env: dict[str, str], flag: str) -> str:
    printed = subprocess.run(
        ["java", "-XX:+PrintFlagsFinal", "-version"], env=env, capture_output=True, text=True, check=True
    ).stdout
    return next(line.split()[3] for line in printed.splitlines() if f" {flag} " in line)


def test_a_jvm_the_suite_starts_stops_at_c1() -> None:
    assert os.environ[JVM_OPTIONS] == SUITE_JVM_OPTIONS
    assert _final_flag(dict(os.environ), "TieredStopAtLevel") == "1"
    assert _final_flag({"PATH": os.environ["PATH"]}, "TieredStopAtLevel") == "4", "HotSpot's default is C2"


def test_the_spark_image_on_process_backed_nodes_takes_the_machines_jdk_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert images.image_env(SPARK_IMAGE)[JVM_OPTIONS] == SUITE_JVM_OPTIONS
    monkeypatch.delenv(JVM_OPTIONS)
    assert JVM_OPTIONS not in images.image_env(SPARK_IMAGE)
