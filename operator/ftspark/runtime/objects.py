"""The checkpoint, savepoint and application files on S3, as the driver runtime sees them (boto3, beside
Spark's S3A).

The client is built from the same fs.s3a.* settings Spark gets, with bounded timeouts and few retries, so an
unreachable S3 is an error within seconds rather than a hang.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from ftspark.adapters.s3.stores import split_uri

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import GetObjectOutputTypeDef

T = TypeVar("T")
_ABSENT = frozenset({"404", "NoSuchKey", "NotFound"})


class StorageError(Exception):
    """S3 could not be reached or refused a request."""


class TooLargeError(Exception):
    """An object larger than the caller takes."""


def endpoint_url(endpoint: str | None, ssl_enabled: str | None) -> str | None:
    """fs.s3a.endpoint as boto3 needs it: S3A also takes a bare host[:port], over HTTPS unless
    fs.s3a.connection.ssl.enabled is false."""
    if not endpoint or "://" in endpoint:
        return endpoint or None
    scheme = "http" if (ssl_enabled or "true").lower() == "false" else "https"
    return f"{scheme}://{endpoint}"


def s3_client(
    spark_conf: Mapping[str, str], *, timeout: float = 10.0, env: Mapping[str, str] = os.environ
) -> S3Client:
    """Credentials in the order S3A's default chain takes them: fs.s3a.access.key/secret.key/session.token,
    else boto3's own chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, profiles, web
    identity, instance role). Region: fs.s3a.endpoint.region, else AWS_REGION or AWS_DEFAULT_REGION."""

    def s3a(key: str) -> str | None:
        return spark_conf.get(f"spark.hadoop.fs.s3a.{key}")

    path_style = (s3a("path.style.access") or "false").lower() == "true"
    client: S3Client = boto3.client(
        "s3",
        endpoint_url=endpoint_url(s3a("endpoint"), s3a("connection.ssl.enabled")),
        aws_access_key_id=s3a("access.key"),
        aws_secret_access_key=s3a("secret.key"),
        aws_session_token=s3a("session.token"),
        region_name=s3a("endpoint.region")
        or env.get("AWS_REGION")
        or env.get("AWS_DEFAULT_REGION")
        or "us-east-1",
        config=Config(
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"max_attempts": 2, "mode": "standard"},
            s3={"addressing_style": "path" if path_style else "auto"},
        ),
    )
    return client


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


class ObjectStore:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def check(self, uri: str) -> None:
        """StorageError unless the bucket of uri answers."""
        bucket, _ = split_uri(uri)
        if self._call(f"reach bucket {bucket}", lambda: self._s3.head_bucket(Bucket=bucket)) is None:
            raise StorageError(f"bucket {bucket} does not exist")

    def list(self, uri: str) -> dict[str, int]:
        """Sizes of the objects under the folder uri, by path relative to it (S3A folder markers skipped)."""
        bucket, key = split_uri(uri)
        prefix = f"{key.strip('/')}/"

        def listing() -> dict[str, int]:
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            return {
                item["Key"].removeprefix(prefix): item["Size"]
                for page in pages
                for item in page.get("Contents", [])
                if not item["Key"].endswith("/")
            }

        return self._call(f"list {uri}", listing) or {}

    def first_named(self, uri: str, name: str, among: int = 1000) -> str | None:
        """The first object called name (its key's last part) among the first `among` under the folder uri,
        as a URI; None if there is none."""
        bucket, key = split_uri(uri)
        prefix = f"{key.strip('/')}/"

        def first_page() -> list[str]:
            page = self._s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=among)
            return [
                item["Key"] for item in page.get("Contents", []) if item["Key"].rsplit("/", 1)[-1] == name
            ]

        found = self._call(f"list {uri}", first_page)
        return f"s3://{bucket}/{found[0]}" if found else None

    def read(self, uri: str, first: int | None = None) -> bytes | None:
        """The object's bytes, or its first `first` bytes only (a ranged GET; the object must not be empty);
        None if there is no such object."""
        bucket, key = split_uri(uri)

        def get() -> GetObjectOutputTypeDef:
            if first is None:
                return self._s3.get_object(Bucket=bucket, Key=key)
            return self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{first - 1}")

        answer = self._call(f"read {uri}", get)
        return None if answer is None else answer["Body"].read()

    def download(self, uri: str, target: Path, max_bytes: int | None = None) -> bool:
        """Stream the object into target (no whole file in memory); False if there is no such object;
        TooLargeError, with nothing written, if it has more than max_bytes."""
        bucket, key = split_uri(uri)

        def fetch() -> bool:
            answer = self._s3.get_object(Bucket=bucket, Key=key)
            if max_bytes is not None and answer["ContentLength"] > max_bytes:
                answer["Body"].close()
                raise TooLargeError(f"{uri}: {answer['ContentLength']} bytes, more than {max_bytes}")
            with target.open("wb") as file:
                shutil.copyfileobj(answer["Body"], file)
            return True

        return self._call(f"read {uri}", fetch) or False

    def exists(self, uri: str) -> bool:
        bucket, key = split_uri(uri)
        return self._call(f"stat {uri}", lambda: self._s3.head_object(Bucket=bucket, Key=key)) is not None

    def write(self, uri: str, data: bytes) -> None:
        bucket, key = split_uri(uri)
        self._call(f"write {uri}", lambda: self._s3.put_object(Bucket=bucket, Key=key, Body=data))

    def copy(self, source: str, target: str) -> None:
        src_bucket, src_key = split_uri(source)
        bucket, key = split_uri(target)
        self._call(
            f"copy {source} to {target}",
            lambda: self._s3.copy_object(
                Bucket=bucket, Key=key, CopySource={"Bucket": src_bucket, "Key": src_key}
            ),
        )

    def delete(self, uri: str) -> None:
        bucket, key = split_uri(uri)
        self._call(f"delete {uri}", lambda: self._s3.delete_object(Bucket=bucket, Key=key))

    @staticmethod
    def _call(what: str, request: Callable[[], T]) -> T | None:
        """The answer, None for an absent object, StorageError for everything else that goes wrong."""
        try:
            return request()
        except ClientError as error:
            answer = error.response.get("Error", {})
            code, detail = answer.get("Code", ""), answer.get("Message", "")
            if code in _ABSENT:
                return None
            raise StorageError(f"{what}: S3 answered {code}" + (f" ({detail})" if detail else "")) from error
        except NoCredentialsError as error:
            raise StorageError(f"{what}: {error}") from error
        except BotoCoreError as error:
            raise StorageError(f"{what}: S3 is unreachable: {error}") from error
