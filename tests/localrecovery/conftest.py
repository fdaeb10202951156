"""Fixtures for task-local recovery: the wrapper jar (built by the project's script, cached), the S3A jars,
and a fresh bucket on the loopback S3 server."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from ftspark_dev.cluster.s3server import S3Server

REPO = Path(__file__).resolve().parents[2]


def _script(name: str) -> Path:
    done = subprocess.run(
        [str(REPO / "tools" / name)], check=True, capture_output=True, text=True, timeout=900
    )
    return Path(done.stdout.strip())


@pytest.fixture(scope="session")
def local_recovery_jar() -> Path:
    return _script("local_recovery_jar.sh")


@pytest.fixture(scope="session")
def s3a_jars() -> Path:
    return _script("spark_jars.sh")


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = f"lr-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return name
