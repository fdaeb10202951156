"""pytest plugin: the suite's JVMs compile with C1 only (`-XX:TieredStopAtLevel=1`, in JDK_JAVA_OPTIONS).

The suite starts hundreds of short-lived Spark JVMs (drivers, executors, spark-submit's launcher) on 2 cores.
C2, HotSpot's optimising compiler, pays off only in JVMs that run long: a driver that starts a session and
commits a streaming batch spends about 45 % of its CPU on it (20 s of CPU with it, 11 s without, measured
on this kind of machine). Behaviour is the same; only compiled code is less optimised.

Only the suite: `make bench`, `make demo` and the real-node tier (the images' JVMs, as shipped) keep HotSpot's
default. JDK_JAVA_OPTIONS is read by the `java` launcher only, so it never mixes with the JAVA_TOOL_OPTIONS
the harness sets for java.io.tmpdir. A value already in the environment is kept.
"""

from __future__ import annotations

import os

import pytest

from ftspark_dev.nodes.images import JVM_OPTIONS

SUITE_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault(JVM_OPTIONS, SUITE_JVM_OPTIONS)
