"""Payload storage for the HA stores (Flink's `high-availability.storageDir`): bytes by s3:// URI.

Implementations: adapters.s3.stores.S3BlobStore, adapters.memory.stores.MemoryBlobStore. A new one
becomes a Backend's `blobs` in tests/contract/conftest.py, where tests/contract/test_job_graph_store.py's
large-graph tests exercise it.
"""

from __future__ import annotations

from typing import Protocol


class BlobStore(Protocol):
    def put(self, uri: str, data: bytes) -> None:
        """Create the object; an object already at uri is never overwritten (payload names are unique)."""

    def get(self, uri: str) -> bytes | None: ...

    def delete(self, uri: str) -> None:
        """Remove the object; absent is fine (deletes are retried after crashes)."""
