"""An S3-protocol server on loopback (moto in server mode, in its own process so a test can stop it)."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from ftspark_dev.processes import ManagedProcess, free_port, wait_until_healthy

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ACCESS_KEY = "ftspark-test"
SECRET_KEY = "ftspark-test-secret"
REGION = "us-east-1"


def spark_s3a_conf(endpoint: str, *, credentials: bool = True) -> dict[str, str]:
    """Spark settings that point S3A at a server of ours on loopback. credentials=False: S3A takes them from
    AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (a job's spec passes those from a Secret, never in plain text)."""
    s3a = "spark.hadoop.fs.s3a."
    keys = {
        f"{s3a}aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        f"{s3a}access.key": ACCESS_KEY,
        f"{s3a}secret.key": SECRET_KEY,
    }
    return {
        f"{s3a}endpoint": endpoint,
        f"{s3a}endpoint.region": REGION,
        f"{s3a}path.style.access": "true",
        f"{s3a}connection.ssl.enabled": "false",
        **(keys if credentials else {}),
    }


@dataclass
class S3Server:
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ftspark-s3-")))
    # Loopback, unless pods on real nodes must reach it (they cannot reach the host's loopback).
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        self.port = self.port or free_port(self.host)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> S3Server:
        self._process = ManagedProcess(
            "moto-s3",
            [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
            self.log_dir,
        )
        self._process.start()
        wait_until_healthy(self._process, f"{self.endpoint}/moto-api/", timeout=60)
        return self

    def stop(self) -> None:
        self._process.stop()
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def pause(self) -> None:
        """Fault injection, an S3 outage: the server stops answering (SIGSTOP); requests hang and time out."""
        self._process.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._process.signal(signal.SIGCONT)

    def spark_conf(self, *, credentials: bool = True) -> dict[str, str]:
        return spark_s3a_conf(self.endpoint, credentials=credentials)

    def client(self, config: Config | None = None) -> S3Client:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=config,
        )

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
