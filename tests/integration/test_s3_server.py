"""The S3 server of the suite (ftspark_dev.cluster.s3server) speaks real S3, including the conditional
writes and deletes fencing relies on; an operator with its HA records on S3 refuses a server that ignores
them."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

from ftspark.adapters.s3.stores import S3Records
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import operator_env
from ftspark_dev.cluster.s3server import S3Server


def test_objects_round_trip_and_conditional_writes_and_deletes_are_enforced(s3_server: S3Server) -> None:
    s3 = s3_server.client()
    bucket = f"b-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)

    first = s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"v1", IfNoneMatch="*")
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"intruder", IfNoneMatch="*")
    assert exists.value.response["Error"]["Code"] == "PreconditionFailed"

    second = s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"v2", IfMatch=first["ETag"])
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"stale", IfMatch=first["ETag"])
    assert stale.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="ha/pointer")["Body"].read() == b"v2"

    with pytest.raises(ClientError) as stale_delete:
        s3.delete_object(Bucket=bucket, Key="ha/pointer", IfMatch=first["ETag"])
    assert stale_delete.value.response["Error"]["Code"] == "PreconditionFailed"
    s3.delete_object(Bucket=bucket, Key="ha/pointer", IfMatch=second["ETag"])
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_the_conditional_write_probe_passes_on_a_real_server_and_leaves_nothing(
    s3_server: S3Server, bucket: str
) -> None:
    S3Records(s3_server.client(), f"s3://{bucket}/installation").refuse_unless_fenced()
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


class _Unconditional(BaseHTTPRequestHandler):
    """An S3-compatible server that takes every PUT as a plain write and every DELETE as done: If-None-Match
    and If-Match ignored, as some servers do."""

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.md5(body).hexdigest()}"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@contextmanager
def _unconditional_s3() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unconditional)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


def test_an_operator_refuses_to_start_on_an_s3_that_ignores_conditional_writes(
    control_plane: ControlPlane,
) -> None:
    with _unconditional_s3() as endpoint:
        started = subprocess.run(
            [
                *(sys.executable, "-m", "ftspark.app.main", "--identity=refuses"),
                *("--namespace=ftspark-system", "--watch-namespaces=jobs"),
                f"--kubeconfig={control_plane.kubeconfig}",
                *(f"--s3-endpoint={endpoint}", "--ha-store=s3", "--ha-s3-root=s3://ha/installation"),
            ],
            env=operator_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    last_line = started.stderr.strip().splitlines()[-1]
    assert started.returncode == 2, started.stderr
    assert "refusing to start: the S3 server at" in last_line, started.stderr
    assert "ignores If-None-Match: *" in last_line and "haStore.type configmaps" in last_line
