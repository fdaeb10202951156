"""Looks into Spark's checkpoint directory on S3 before a restore."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from ftspark.adapters.s3.stores import split_uri
from ftspark.domain.ha import CheckpointPointer

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class S3CheckpointInspector:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def committed(self, pointer: CheckpointPointer) -> bool:
        bucket, prefix = split_uri(pointer.location)
        try:
            self._s3.head_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/commits/{pointer.batch_id}")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return False
            raise
        return True
