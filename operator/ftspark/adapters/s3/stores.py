"""The HA stores on S3 (boto3), and the BlobStore the ConfigMap stores keep large payloads in.

Layout under the store's root s3://<bucket>/<prefix> (record data keys: adapters.records):

    <prefix>/ha/<namespace>/<job>/checkpoints.json                            (drivers write here)
    <prefix>/graphs/<namespace>/<job>/jobgraph.json                           (the operator alone)
    <prefix>/results/<uid>_DIRTY.json  →  <prefix>/results/<uid>.json     (the operator alone; FLIP-194)

Drivers reach the root with their jobs' credentials, so what only the operator writes lies apart from what
drivers write: an admin's bucket policy gives the jobs' credentials `ha/` and nothing else of the root.

Each object is JSON {"data": {...}, "fences": {"operator": n, "driver": n}, "writtenBy": "..."}; its ETag is
the record's version. Writes are conditional: IfNoneMatch="*" to create, IfMatch=<etag> to replace or
delete (412 PreconditionFailed or 409 ConditionalRequestConflict: re-read and retry). The client's timeouts
and retries are the caller's (botocore.config.Config).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar, assert_never

from botocore.exceptions import BotoCoreError, ClientError

from ftspark.adapters.records import ConflictError, Kind, Record, RecordId, stores_on
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.ha import JobKey
from ftspark.ports.blobs import check_folder
from ftspark.ports.stores import HaStores, StoreUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

T = TypeVar("T")
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
_ABSENT_CODES = frozenset({"NoSuchKey", "404"})
# An ETag the probe's object never has (no MD5 of its body), for the conditional-write probe.
_NEVER_AN_ETAG = '"00000000000000000000000000000000"'


class UnfencedStoreError(RuntimeError):
    """The S3 server takes conditional writes as plain ones (S3Records.refuse_unless_fenced)."""


_DELETE_BATCH = 1000  # S3's most keys per DeleteObjects

log = logging.getLogger(__name__)


def split_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/some/key → ("bucket", "some/key"); s3a:// (Spark's spelling) is the same store."""
    scheme, separator, rest = uri.partition("://")
    if scheme not in ("s3", "s3a") or not separator:
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, key = rest.partition("/")
    return bucket, key


class S3Records:
    clean_results_apart = True

    def __init__(self, s3: S3Client, root: str, *, namespaces: Sequence[str] = ()) -> None:
        """namespaces limits scan() of job records to those, as on ConfigMaps; empty: all of them."""
        self._s3 = s3
        self._bucket, prefix = split_uri(root)
        self._prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self._namespaces = tuple(namespaces)

    def read(self, rid: RecordId) -> Record | None:
        return self._read_key(self._key(rid))

    def create(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> None:
        key = self._key(rid)
        _call(
            f"create s3://{self._bucket}/{key}",
            lambda: self._s3.put_object(
                Bucket=self._bucket, Key=key, Body=_body(data, fences, writer), IfNoneMatch="*"
            ),
        )

    def replace(
        self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str, version: str
    ) -> None:
        key = self._key(rid)
        # A vanished object is a conflict too (some servers answer NoSuchKey, S3 412): it changed since read.
        _call(
            f"replace s3://{self._bucket}/{key}",
            lambda: self._s3.put_object(
                Bucket=self._bucket, Key=key, Body=_body(data, fences, writer), IfMatch=version
            ),
            absent_is_conflict=True,
        )

    def remove(self, rid: RecordId, version: str) -> None:
        key = self._key(rid)
        _call(
            f"delete s3://{self._bucket}/{key}",
            lambda: self._s3.delete_object(Bucket=self._bucket, Key=key, IfMatch=version),
        )

    def scan(self, kind: Kind) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for key, record_key, _ in self._listed(kind):
            try:
                record = self._read_key(key)
            except (ValueError, KeyError, TypeError) as error:
                # Drivers write under the root too: one unreadable object must not hide the others.
                log.warning("s3://%s/%s skipped: not a record (%r)", self._bucket, key, error)
                continue
            if record is not None:  # deleted since the listing
                found[record_key] = record
        return found

    def checkpoint_versions(self) -> dict[JobKey, str]:
        """The version of every job's checkpoint record, from a listing alone (no reads). S3 has no watch:
        a changed version is a changed record."""
        return {RecordId("checkpoints", key).job(): etag for _, key, etag in self._listed("checkpoints")}

    def _listed(self, kind: Kind) -> list[tuple[str, str, str]]:
        """(object key, record key, ETag) of every record of a kind; job records of the watched namespaces."""
        base = f"{self._prefix}{_folder(kind)}"
        job_record = kind in ("jobgraph", "checkpoints")
        folders = [f"{base}{namespace}/" for namespace in self._namespaces] if job_record else []
        listed = []
        for folder in folders or [base]:
            for key, etag in self._list(folder):
                record_key = _record_key(kind, key.removeprefix(base))
                if record_key is not None:
                    listed.append((key, record_key, etag))
        return listed

    def refuse_unless_fenced(self) -> None:
        """Raises UnfencedStoreError unless the server refuses a create of an object that exists
        (If-None-Match: *) and a replace of it with an ETag it never had (If-Match), as Amazon S3, MinIO and
        the Versity S3 Gateway do: a server that takes them as plain writes would make every fenced write
        last-writer-wins. Probed on a scratch object of its own under the root, deleted after."""
        key = f"{self._prefix}probe/{uuid.uuid4().hex}.json"
        where = f"s3://{self._bucket}/{key}"
        body = _body({}, {}, "conditional-write probe")
        write = partial(self._s3.put_object, Bucket=self._bucket, Key=key, Body=body)
        _call(f"create {where}", write)
        conditional = {
            "If-None-Match: *": partial(write, IfNoneMatch="*"),
            "If-Match": partial(write, IfMatch=_NEVER_AN_ETAG),
        }
        try:
            for header, must_fail in conditional.items():
                try:
                    _call(f"write {where} with {header}", must_fail)
                except ConflictError:
                    continue
                raise UnfencedStoreError(
                    f"the S3 server at {self._s3.meta.endpoint_url} ignores {header}: it took a conditional "
                    f"write of {where} that must fail, so the HA store's fenced writes would silently "
                    "overwrite one another. Use a server that honours conditional writes (Amazon S3, MinIO, "
                    "the Versity S3 Gateway), or haStore.type configmaps."
                )
        finally:
            _call(f"delete {where}", lambda: self._s3.delete_object(Bucket=self._bucket, Key=key))

    def _key(self, rid: RecordId) -> str:
        return f"{self._prefix}{_folder(rid.kind)}{_name(rid.kind, rid.key)}"

    def _read_key(self, key: str) -> Record | None:
        answer = _call(
            f"read s3://{self._bucket}/{key}", lambda: self._s3.get_object(Bucket=self._bucket, Key=key)
        )
        if answer is None:
            return None
        stored = json.loads(answer["Body"].read())
        return Record(stored["data"], stored["fences"], answer["ETag"])

    def _list(self, folder: str) -> list[tuple[str, str]]:
        def listing() -> list[tuple[str, str]]:
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=folder)
            return [(item["Key"], item["ETag"]) for page in pages for item in page.get("Contents", [])]

        return _call(f"list s3://{self._bucket}/{folder}", listing) or []


def _folder(kind: Kind) -> str:
    match kind:
        case "result" | "result-dirty":
            return "results/"
        case "jobgraph":
            return "graphs/"
        case "checkpoints":
            return "ha/"
        case _:
            assert_never(kind)


def _name(kind: Kind, key: str) -> str:
    """The record's object in its kind's folder (_record_key reads the key back)."""
    match kind:
        case "result":
            return f"{key}.json"
        case "result-dirty":
            return f"{key}_DIRTY.json"
        case "jobgraph" | "checkpoints":
            return f"{key}/{kind}.json"
        case _:
            assert_never(kind)


def _record_key(kind: Kind, name: str) -> str | None:
    """The key of the record kept in object `name` of the kind's folder; None if it holds another kind."""
    match kind:
        case "result":
            clean = name.endswith(".json") and not name.endswith("_DIRTY.json")
            return name.removesuffix(".json") if clean else None
        case "result-dirty":
            return name.removesuffix("_DIRTY.json") if name.endswith("_DIRTY.json") else None
        case "jobgraph" | "checkpoints":
            suffix = f"/{kind}.json"
            return name.removesuffix(suffix) if name.endswith(suffix) and name.count("/") == 2 else None
        case _:
            assert_never(kind)


class S3BlobStore:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def put(self, uri: str, data: bytes) -> None:
        bucket, key = split_uri(uri)
        try:
            _call(
                f"put {uri}", lambda: self._s3.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            )
        except ConflictError:
            # Our own earlier try whose answer was lost (botocore retries) is fine; anything else is not.
            if self.get(uri) != data:
                raise FileExistsError(uri) from None

    def get(self, uri: str) -> bytes | None:
        bucket, key = split_uri(uri)
        answer = _call(f"read {uri}", lambda: self._s3.get_object(Bucket=bucket, Key=key))
        return None if answer is None else answer["Body"].read()

    def delete(self, uri: str) -> None:
        bucket, key = split_uri(uri)
        _call(f"delete {uri}", lambda: self._s3.delete_object(Bucket=bucket, Key=key))

    def any_with_prefix(self, prefix: str) -> bool:
        bucket, key = split_uri(prefix)
        answer = _call(
            f"list {prefix}", lambda: self._s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        )
        return bool(answer and answer.get("KeyCount"))

    def delete_prefix(self, prefix: str, *, last: str = "") -> None:
        check_folder(prefix, last)
        bucket, key = split_uri(prefix)
        _, last_key = split_uri(last) if last else (bucket, "")

        def listing() -> list[str]:
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
            return [item["Key"] for page in pages for item in page.get("Contents", [])]

        keys = [k for k in _call(f"list {prefix}", listing) or [] if k != last_key]
        for start in range(0, len(keys), _DELETE_BATCH):
            self._delete_keys(bucket, keys[start : start + _DELETE_BATCH], f"delete under {prefix}")
        if last_key:
            self.delete(last)

    def _delete_keys(self, bucket: str, keys: list[str], what: str) -> None:
        """One DeleteObjects call; StoreUnavailableError if S3 reports any key not deleted."""
        objects: list[ObjectIdentifierTypeDef] = [{"Key": key} for key in keys]
        answer = _call(
            what, lambda: self._s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        )
        errors = answer.get("Errors", []) if answer else []
        if errors:
            raise StoreUnavailableError(
                f"{what}: {len(errors)} objects not deleted, e.g. {errors[0].get('Key')}: "
                f"{errors[0].get('Code')}"
            )


def _body(data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> bytes:
    return json.dumps(
        {"data": dict(data), "fences": dict(fences), "writtenBy": writer}, sort_keys=True
    ).encode()


def _call(what: str, request: Callable[[], T], *, absent_is_conflict: bool = False) -> T | None:
    """The answer, None if the object is absent; ConflictError on a failed condition; else unavailable."""
    try:
        return request()
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in _CONFLICT_CODES or (absent_is_conflict and code in _ABSENT_CODES):
            raise ConflictError(what) from error
        if code in _ABSENT_CODES:
            return None
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise StoreUnavailableError(f"{what}: S3 answered {status} {code}") from error
    except BotoCoreError as error:
        raise StoreUnavailableError(f"{what}: S3 is unreachable: {error}") from error


def s3_stores(s3: S3Client, root: str, seal: RecordSeal, *, namespaces: Sequence[str] = ()) -> HaStores:
    """Objects hold any size, so job graphs stay inline: no payload indirection on S3."""
    return stores_on(S3Records(s3, root, namespaces=namespaces), None, seal)
