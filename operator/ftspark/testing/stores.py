"""The HA stores in memory: the same store code as the ConfigMap and S3 backends over a dict (thread-safe)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Mapping

from ftspark.adapters.records import (
    DEFAULT_PAYLOAD_THRESHOLD,
    ConflictError,
    Kind,
    Record,
    RecordId,
    stores_on,
)
from ftspark.adapters.seal import RecordSeal
from ftspark.ports.blobs import check_folder
from ftspark.ports.stores import HaStores


class MemoryRecords:
    clean_results_apart = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[RecordId, Record] = {}
        self._versions = itertools.count(1)
        self.reads: Counter[Kind] = Counter()  # what a reconcile costs, for tests

    def read(self, rid: RecordId) -> Record | None:
        with self._lock:
            self.reads[rid.kind] += 1
            return self._records.get(rid)

    def create(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> None:
        with self._lock:
            if rid in self._records:
                raise ConflictError(str(rid))
            self._store(rid, data, fences)

    def replace(
        self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str, version: str
    ) -> None:
        with self._lock:
            self._expect(rid, version)
            self._store(rid, data, fences)

    def remove(self, rid: RecordId, version: str) -> None:
        with self._lock:
            if rid in self._records:
                self._expect(rid, version)
                del self._records[rid]

    def scan(self, kind: Kind) -> dict[str, Record]:
        with self._lock:
            return {rid.key: record for rid, record in self._records.items() if rid.kind == kind}

    def _expect(self, rid: RecordId, version: str) -> None:
        current = self._records.get(rid)
        if current is None or current.version != version:
            raise ConflictError(str(rid))

    def _store(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int]) -> None:
        self._records[rid] = Record(dict(data), dict(fences), str(next(self._versions)))


class MemoryBlobStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.objects: dict[str, bytes] = {}

    def put(self, uri: str, data: bytes) -> None:
        with self._lock:
            if self.objects.setdefault(uri, data) != data:
                raise FileExistsError(uri)

    def get(self, uri: str) -> bytes | None:
        with self._lock:
            return self.objects.get(uri)

    def delete(self, uri: str) -> None:
        with self._lock:
            self.objects.pop(uri, None)

    def any_with_prefix(self, prefix: str) -> bool:
        with self._lock:
            return any(uri.startswith(prefix) for uri in self.objects)

    def delete_prefix(self, prefix: str, *, last: str = "") -> None:
        check_folder(prefix, last)
        with self._lock:
            for uri in [uri for uri in self.objects if uri.startswith(prefix) and uri != last]:
                del self.objects[uri]
            self.objects.pop(last, None)


def memory_stores(
    records: MemoryRecords | None = None,
    blobs: MemoryBlobStore | None = None,
    *,
    seal: RecordSeal | None = None,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
) -> HaStores:
    """seal: a fresh key's by default (a test that forges records passes its own to compare)."""
    return stores_on(
        records or MemoryRecords(),
        blobs or MemoryBlobStore(),
        seal or RecordSeal(RecordSeal.new_key()),
        payload_threshold=payload_threshold,
    )
