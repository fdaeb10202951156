"""Objects by s3:// URI: payload storage for the HA stores (Flink's `high-availability.storageDir`), and the
jobs' own storage, where the operator disposes of savepoints.

Implementations: adapters.s3.stores.S3BlobStore, the test double ftspark.testing.stores.MemoryBlobStore. A new
one becomes a Backend's `blobs` in tests/contract/conftest.py, where tests/contract/test_job_graph_store.py's
large-graph tests exercise it, and joins the stores of tests/unit/test_savepoint_policy.py's prefix tests.
"""

from __future__ import annotations

from typing import Protocol


class BlobStore(Protocol):
    def put(self, uri: str, data: bytes) -> None:
        """Create the object; an object already at uri is never overwritten (payload names are unique)."""

    def get(self, uri: str) -> bytes | None: ...

    def delete(self, uri: str) -> None:
        """Remove the object; absent is fine (deletes are retried after crashes)."""

    def any_with_prefix(self, prefix: str) -> bool:
        """Whether any object's URI starts with prefix."""

    def delete_prefix(self, prefix: str, *, last: str = "") -> None:
        """Remove every object under prefix, a folder, the object `last` (under it) only after all the
        others; absent ones are fine. ValueError for what check_folder refuses; StoreUnavailableError if an
        object could not be removed: `last` is then still there."""


def check_folder(prefix: str, last: str = "") -> None:
    """ValueError unless prefix names a folder below a bucket's top (s3://bucket/a/.../, no empty, '.' or '..'
    segment) and last is empty or under it: no slip (an empty id, a missing slash) may empty a bucket or a
    sibling's folder."""
    scheme, separator, rest = prefix.partition("://")
    bucket, _, key = rest.partition("/")
    segments = key.split("/")[:-1]
    if (
        scheme not in ("s3", "s3a")
        or not separator
        or not bucket
        or not key.endswith("/")
        or any(segment in ("", ".", "..") for segment in segments)
        or (last and not last.startswith(prefix))
    ):
        raise ValueError(f"not a folder to delete under: {prefix} (last: {last or 'none'})")
