"""The driver's JVM maps the class-data archive `make class-data` made for its classpath: the key the runtime
computes names the archive the JVM accepts (with -Xshare:on an archive it cannot map stops the JVM; without,
it would only be ignored, and every driver would start as slowly as before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ftspark.runtime.session import DRIVER_JAVA_OPTIONS, spark_settings
from ftspark_dev.nodes.images import JVM_OPTIONS

SESSION = (
    "import json, sys; from ftspark.runtime.session import build_session; "
    "print(build_session(json.loads(sys.argv[1])).range(5).count())"
)


def test_the_driver_jvm_maps_the_archive_made_for_its_classpath(s3a_jars: Path, tmp_path: Path) -> None:
    conf = {"spark.master": "local[1]", "spark.ui.enabled": "false"}
    settings = spark_settings(conf, str(tmp_path), s3a_jars, os.environ)
    assert "-XX:SharedArchiveFile=" in settings.get(DRIVER_JAVA_OPTIONS, ""), (
        "no archive for this machine's driver classpath: `make class-data` makes it"
    )
    env = {**os.environ, JVM_OPTIONS: f"{os.environ.get(JVM_OPTIONS, '')} -Xshare:on"}
    run = subprocess.run(
        [sys.executable, "-c", SESSION, json.dumps(settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0 and run.stdout.split()[-1:] == ["5"], run.stderr[-3000:]
