"""The S3-protocol test server speaks real S3, including the conditional writes fencing relies on."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from ftspark_dev.s3server import S3Server


def test_objects_round_trip_and_conditional_puts_are_enforced(s3_server: S3Server) -> None:
    s3 = s3_server.client()
    bucket = f"b-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)

    first = s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"v1", IfNoneMatch="*")
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"intruder", IfNoneMatch="*")
    assert exists.value.response["Error"]["Code"] == "PreconditionFailed"

    s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"v2", IfMatch=first["ETag"])
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=bucket, Key="ha/pointer", Body=b"stale", IfMatch=first["ETag"])
    assert stale.value.response["Error"]["Code"] == "PreconditionFailed"

    assert s3.get_object(Bucket=bucket, Key="ha/pointer")["Body"].read() == b"v2"
