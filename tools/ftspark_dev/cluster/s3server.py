"""An S3 server on loopback, in its own process so a test can stop or pause it: the Versity S3 Gateway
(tools/versitygw/build.sh), a real S3 server whose conditional writes and deletes the HA stores' fencing
rests on."""

from __future__ import annotations

import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import boto3
from botocore.config import Config

from ftspark_dev.cluster.processes import REPO_ROOT, ManagedProcess, built_by, free_port, wait_until_healthy

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ACCESS_KEY = "ftspark-test"
SECRET_KEY = "ftspark-test-secret"
REGION = "us-east-1"
HEALTH_PATH = "/ftspark-health"  # answered without credentials


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


class ObjectRead(NamedTuple):
    reader: str  # its address
    object: str  # <bucket>/<key>
    client: str  # the user agent's first word: Boto3/<version>, or Hadoop's S3A's


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

    @property
    def access_log(self) -> Path:
        """Every request the server answered, a line each (S3's server access log format)."""
        return self.log_dir / "access.log"

    def access_log_offset(self) -> int:
        """Where the access log ends now: object_reads(since=it) sees only later requests."""
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def object_reads(self, since: int = 0) -> list[ObjectRead]:
        """The objects read (GetObject answered) after an access_log_offset(), whole or in part, as counted
        at the server, whatever the client counts."""
        with self.access_log.open("rb") as log:
            log.seek(since)
            lines = log.read().decode().splitlines()
        reads = []
        for line in lines:
            # owner bucket [date zone] ip requester id operation key uri status error sent size time time
            # referer user-agent... (the status is 200 for a ranged read too, and the range is not logged)
            fields = line.split(" ")
            if len(fields) > 17 and fields[7] == "s3_GetObject" and fields[10] == "200":
                reads.append(ObjectRead(fields[4], f"{fields[1]}/{fields[8]}", fields[17]))
        return reads

    def start(self) -> S3Server:
        """Its objects are files under log_dir/objects (the gateway's POSIX backend keeps ETags and metadata
        in extended attributes, which ext4, xfs and tmpfs since Linux 6.6 have)."""
        objects = self.log_dir / "objects"
        objects.mkdir(parents=True, exist_ok=True)
        address = f"{self.host}:{self.port}"
        self._process = ManagedProcess(
            "versitygw",
            [
                *[str(built_by(REPO_ROOT / "tools" / "versitygw" / "build.sh")), "--port", address],
                *["--access", ACCESS_KEY, "--secret", SECRET_KEY, "--region", REGION],
                *["--health", HEALTH_PATH, "--access-log", str(self.access_log), "--quiet"],
                *["posix", str(objects)],
            ],
            self.log_dir,
        )
        self._process.start()
        wait_until_healthy(self._process, f"{self.endpoint}{HEALTH_PATH}", timeout=60)
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
