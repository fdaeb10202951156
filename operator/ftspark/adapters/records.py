"""The HA stores written once, over fenced and versioned records (docs/architecture.md, "Fencing").

A record is the unit of compare-and-swap: a ConfigMap (adapters.k8s), an S3 object (adapters.s3) or a dict
entry (ftspark.testing.stores). It holds string data, the highest term that wrote it per fence scope, and a
version (resourceVersion, ETag, counter). A backend only implements `Records`; the one fenced CAS loop
(`FencedRecords`) and the store semantics live here, so every backend behaves the same and one contract suite
proves it.

Record data, the same keys on every backend (where a record lives is in each backend's docstring):

    jobgraph     "jobgraph": the JobGraph as JSON; or, above the payload threshold, "jobgraph-pointer": the
                 s3:// URI of the payload `<spec.checkpoint.storage>/ha/jobgraph-<uid>-<32 hex>.json` and
                 "jobgraph-sha256": the payload's digest (it lies in the tenant's storage: sealed by it)
    checkpoints  "counter": the highest checkpoint id ever recorded; "checkpoint-<id>": a CheckpointPointer as
                 JSON, the newest `retained` of them
    result       "result": a JobResultEntry as JSON (backends with `clean_results_apart` keep dirty entries as
                 separate "result-dirty" records, FLIP-194's `<uid>_DIRTY.json` → `<uid>.json`)

Every record also carries "seal" (adapters.seal) over its identity, data and fences, added and checked by
SealedRecords under every store: the record key's for job graphs and results, which only the operator
writes, the job's checkpoint key for its checkpoint record, which its drivers write too. A record whose seal
does not verify is treated as absent: never returned, never followed, its fences not obeyed, replaced by the
next write.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import random
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, assert_never

from pydantic import ValidationError

from ftspark.adapters.seal import SEAL, RecordSeal
from ftspark.domain.fencing import Epoch, FenceScope, RetiredRecordError, StaleEpochError, admit
from ftspark.domain.ha import CheckpointPointer, JobGraph, JobKey, JobResultEntry
from ftspark.metrics import FENCED_WRITES, STORE_CONFLICTS, UNTRUSTED_POINTERS
from ftspark.ports.blobs import BlobStore
from ftspark.ports.stores import (
    CheckpointStore,
    HaStores,
    StoreUnavailableError,
    UntrustedRecordError,
)

DEFAULT_PAYLOAD_THRESHOLD = 64 * 1024
JOBGRAPH = "jobgraph"
JOBGRAPH_POINTER = "jobgraph-pointer"
JOBGRAPH_DIGEST = "jobgraph-sha256"
COUNTER = "counter"
CHECKPOINT_PREFIX = "checkpoint-"
RESULT = "result"
# The shape of a payload name (payload_uri); the random suffix is what makes one unguessable.
_PAYLOAD_NAME = re.compile(rf"/ha/{JOBGRAPH}-[^/]+-(?P<suffix>[0-9a-f]{{32}})\.json$")

log = logging.getLogger(__name__)

Kind = Literal["jobgraph", "checkpoints", "result", "result-dirty"]

_NOT_SEALED = "does not carry this operator's seal (forged, or written with another record key)"


def not_sealed(rid: RecordId) -> str:
    if rid.kind == "checkpoints":
        return "does not carry the job's seal (forged, or written with another job's key)"
    return _NOT_SEALED


@dataclass(frozen=True)
class RecordId:
    kind: Kind
    key: str = ""  # "<namespace>/<name>" for job records, the job uid for results

    @classmethod
    def of_job(cls, kind: Kind, job: JobKey) -> RecordId:
        return cls(kind, str(job))

    def job(self) -> JobKey:
        namespace, name = self.key.split("/", 1)
        return JobKey(namespace=namespace, name=name)

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclass(frozen=True)
class Record:
    data: Mapping[str, str]
    fences: Mapping[str, int]
    version: str
    trusted: bool = True  # False: its seal does not verify (SealedRecords); its data and fences mean nothing


class ConflictError(Exception):
    """The record changed, appeared or vanished since it was read: read it again and retry."""


class Records(Protocol):
    """A backend's conditional record I/O. Unreachable or failing backends raise StoreUnavailableError."""

    clean_results_apart: bool

    def read(self, rid: RecordId) -> Record | None: ...

    def create(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> None:
        """ConflictError if the record exists."""

    def replace(
        self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str, version: str
    ) -> None:
        """ConflictError unless the record is still at version."""

    def remove(self, rid: RecordId, version: str) -> None:
        """ConflictError unless the record is still at version; absent is fine."""

    def scan(self, kind: Kind) -> dict[str, Record]:
        """Every record of a kind, by key."""


Change = Callable[[Mapping[str, str] | None], Mapping[str, str] | None]
Seals = Callable[[RecordId], RecordSeal]  # the seal a record is written and checked with


def operator_seals(seal: RecordSeal) -> Seals:
    """The operator's: its record key for what only it writes, each job's checkpoint key for that job's
    checkpoint record (its drivers write there too, with the key the operator gives them)."""

    def seal_of(rid: RecordId) -> RecordSeal:
        return RecordSeal(seal.job_key(rid.key)) if rid.kind == "checkpoints" else seal

    return seal_of


class SealedRecords:
    """Records as the stores see them: written with a seal, read without it, `trusted` saying whether it
    verified."""

    def __init__(self, records: Records, seals: Seals) -> None:
        self._records = records
        self._seals = seals
        self.clean_results_apart = records.clean_results_apart

    def read(self, rid: RecordId) -> Record | None:
        record = self._records.read(rid)
        return None if record is None else self._opened(rid, record)

    def create(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> None:
        self._records.create(rid, self._sealed(rid, data, fences), fences, writer)

    def replace(
        self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str, version: str
    ) -> None:
        self._records.replace(rid, self._sealed(rid, data, fences), fences, writer, version)

    def remove(self, rid: RecordId, version: str) -> None:
        self._records.remove(rid, version)

    def scan(self, kind: Kind) -> dict[str, Record]:
        return {
            key: self._opened(RecordId(kind, key), record) for key, record in self._records.scan(kind).items()
        }

    def _sealed(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int]) -> dict[str, str]:
        return {**data, SEAL: self._seals(rid).seal(str(rid), data, fences)}

    def _opened(self, rid: RecordId, record: Record) -> Record:
        data = {key: value for key, value in record.data.items() if key != SEAL}
        seal = record.data.get(SEAL, "")
        trusted = self._seals(rid).verifies(str(rid), data, record.fences, seal)
        return Record(data, record.fences, record.version, trusted)


class FencedRecords:
    """The fenced compare-and-swap loop every store write goes through. A record that is not trusted counts
    as absent (its fences too), but is replaced, never created beside."""

    def __init__(self, records: SealedRecords, *, max_conflicts: int = 100) -> None:
        self.records = records
        self._max_conflicts = max_conflicts

    def check(self, rid: RecordId, epochs: Sequence[Epoch]) -> None:
        """Refuse a stale writer before it writes anything outside the record (payloads)."""
        _admit_all(rid, _trusted(self.records.read(rid)).fences, epochs)

    def update(
        self, rid: RecordId, epochs: Sequence[Epoch], change: Change, *, assume_absent: bool = False
    ) -> Mapping[str, str] | None:
        """Replace the record's data by change(data) (None: absent); returns the data it replaced.

        Every round re-reads the record and re-checks the fences, so a writer deposed while it retried is
        refused too; an exception from change (or a stale epoch) leaves the record as it was. assume_absent:
        the caller saw no record, so the first round creates without reading; one there after all is a
        conflict, and the rounds after it read and check its fences as always.
        """
        writer = ", ".join(str(epoch) for epoch in epochs)
        for round_ in range(self._max_conflicts):
            current = None if assume_absent and round_ == 0 else self.records.read(rid)
            seen = _trusted(current)
            if current is not None and not current.trusted and round_ == 0:
                UNTRUSTED_POINTERS.labels(pointer=rid.kind).inc()
                log.warning("%s %s; not heeded, overwritten", rid, not_sealed(rid))
            old = seen.data if seen.trusted else None
            fences = _admit_all(rid, seen.fences, epochs)
            new = change(old)
            try:
                if current is None:
                    if new is not None:
                        self.records.create(rid, new, fences, writer)
                elif new is None:
                    self.records.remove(rid, current.version)
                elif not current.trusted or dict(new) != dict(current.data) or fences != dict(current.fences):
                    self.records.replace(rid, new, fences, writer, current.version)
            except ConflictError:
                STORE_CONFLICTS.labels(record=rid.kind).inc()
                time.sleep(random.uniform(0, 0.02))  # spread contending writers apart
                continue
            return old
        raise StoreUnavailableError(f"{rid}: still conflicting after {self._max_conflicts} attempts")


_ABSENT = Record({}, {}, "", trusted=False)


def _trusted(record: Record | None) -> Record:
    """The record as a writer may heed it: absent (no data, no fences) unless it is there and trusted."""
    return record if record is not None and record.trusted else _ABSENT


def _admit_all(rid: RecordId, fences: Mapping[str, int], epochs: Sequence[Epoch]) -> dict[str, int]:
    admitted = dict(fences)
    for epoch in epochs:
        try:
            admitted = admit(str(rid), admitted, epoch)
        except StaleEpochError:
            FENCED_WRITES.labels(scope=epoch.scope).inc()
            raise
    return admitted


def payload_uri(graph: JobGraph, suffix: str) -> str:
    """Where a large graph goes: under its job's storage, named by its uid and a random 32-hex suffix."""
    return f"{graph.spec.checkpoint.storage.rstrip('/')}/ha/{JOBGRAPH}-{graph.uid}-{suffix}.json"


def _digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _untrusted(job: JobKey, why: str, pointer: str = "jobgraph-payload") -> UntrustedRecordError:
    UNTRUSTED_POINTERS.labels(pointer=pointer).inc()
    return UntrustedRecordError(f"the job graph record of {job} {why}")


class RecordJobGraphStore:
    """Graphs above the threshold go to the blob store first; the record then only points at them."""

    def __init__(
        self,
        records: Records,
        blobs: BlobStore | None,
        seals: Seals,
        *,
        threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
    ) -> None:
        self._fenced = FencedRecords(SealedRecords(records, seals))
        self._blobs = blobs
        self._threshold = threshold

    def put(self, graph: JobGraph, epoch: Epoch, *, new: bool = False) -> None:
        rid = RecordId.of_job("jobgraph", graph.job)
        payload = graph.model_dump_json()
        uri = None
        if self._blobs is not None and len(payload.encode()) > self._threshold:
            self._fenced.check(rid, [epoch])
            # A fresh name per write: the old pointer stays valid until the new one replaces it.
            uri = payload_uri(graph, uuid.uuid4().hex)
            self._blobs.put(uri, payload.encode())
        data = (
            {JOBGRAPH_POINTER: uri, JOBGRAPH_DIGEST: _digest(payload.encode())}
            if uri
            else {JOBGRAPH: payload}
        )
        try:
            old = self._fenced.update(rid, [epoch], lambda _: data, assume_absent=new)
        except StaleEpochError:
            # Certainly not written (unlike StoreUnavailableError, where the pointer may have landed).
            if uri and self._blobs is not None:
                self._blobs.delete(uri)
            raise
        self._drop_payload(graph.job, old, keep=uri)

    def get(self, job: JobKey) -> JobGraph | None:
        rid = RecordId.of_job("jobgraph", job)
        uri = ""
        for _ in range(3):
            record = self._fenced.records.read(rid)
            if record is None:
                return None
            if not record.trusted:
                raise _untrusted(job, _NOT_SEALED, pointer="jobgraph")
            if JOBGRAPH in record.data:
                return JobGraph.model_validate_json(record.data[JOBGRAPH])
            uri = record.data[JOBGRAPH_POINTER]
            graph = self._payload(job, uri, record.data.get(JOBGRAPH_DIGEST, ""))
            if graph is not None:
                return graph
            # Replaced (and its old payload deleted) between the two reads: read the pointer again.
        raise StoreUnavailableError(f"{rid}: payload {uri} is missing")

    def jobs(self) -> list[JobKey]:
        return [RecordId("jobgraph", key).job() for key in sorted(self._fenced.records.scan("jobgraph"))]

    def delete(self, job: JobKey, epoch: Epoch) -> None:
        old = self._fenced.update(RecordId.of_job("jobgraph", job), [epoch], lambda _: None)
        self._drop_payload(job, old, keep=None)

    def _drop_payload(self, job: JobKey, old: Mapping[str, str] | None, keep: str | None) -> None:
        """Second phase: the pointer no longer names the payload, so it can go — if it is the job's own, named
        by a record the operator wrote (old is only ever a trusted record's data)."""
        if old is None or JOBGRAPH_POINTER not in old or old[JOBGRAPH_POINTER] == keep:
            return
        uri = old[JOBGRAPH_POINTER]
        try:
            if self._payload(job, uri, old.get(JOBGRAPH_DIGEST, "")) is None:
                return  # gone already (a retried delete)
        except UntrustedRecordError as error:
            log.warning("%s; left alone", error)
            return
        self._blob_store().delete(uri)

    def _payload(self, job: JobKey, uri: str, digest: str) -> JobGraph | None:
        """The graph a (sealed) pointer names, None if its payload is absent.

        The payload lies in the tenant's storage, so it is trusted only as far as it proves itself: nothing
        but a payload-shaped name is read, its bytes must have the sealed digest, and it must be a graph of
        this very job whose own storage and uid give exactly this name. UntrustedRecordError otherwise:
        another tenant's object is never parsed, returned or deleted.
        """
        name = _PAYLOAD_NAME.search(uri)
        if name is None:
            raise _untrusted(job, f"points at {uri}, which is no job graph payload")
        payload = self._blob_store().get(uri)
        if payload is None:
            return None
        if not hmac.compare_digest(_digest(payload), digest):
            raise _untrusted(job, f"points at {uri}, which was changed since the operator wrote it")
        try:
            graph = JobGraph.model_validate_json(payload)
        except ValidationError:
            # Not chained: pydantic's message quotes the object's content.
            raise _untrusted(job, f"points at {uri}, which holds no job graph") from None
        if graph.job != job or uri != payload_uri(graph, name["suffix"]):
            raise _untrusted(job, f"points at {uri}, not written for it (a graph of {graph.job} {graph.uid})")
        return graph

    def _blob_store(self) -> BlobStore:
        if self._blobs is None:
            raise StoreUnavailableError("a job graph points at a payload but no blob store is configured")
        return self._blobs


class RecordCheckpointStore:
    """seals: the operator's (operator_seals), or a driver's: its job's checkpoint key (driver_seals). A
    record that does not verify holds no pointers and no fences: a driver finds its job's record gone, the
    operator replaces it at the next attempt."""

    def __init__(self, records: Records, seals: Seals) -> None:
        self._fenced = FencedRecords(SealedRecords(records, seals))

    def add(self, job: JobKey, pointer: CheckpointPointer, epoch: Epoch, *, retained: int) -> None:
        if retained < 1:
            raise ValueError(f"retained must be at least 1, not {retained}")

        rid = RecordId.of_job("checkpoints", job)

        def added(data: Mapping[str, str] | None) -> dict[str, str]:
            if data is None and not _creates_checkpoint_records(epoch.scope):
                raise RetiredRecordError(str(rid), epoch)
            new = dict(data or {})
            counter = int(new.get(COUNTER, "-1"))
            if pointer.checkpoint_id <= counter:
                raise ValueError(f"{job}: checkpoint {pointer.checkpoint_id} is not above counter {counter}")
            new[f"{CHECKPOINT_PREFIX}{pointer.checkpoint_id}"] = pointer.model_dump_json()
            new[COUNTER] = str(pointer.checkpoint_id)
            for dropped in _checkpoint_ids(new)[retained:]:
                del new[f"{CHECKPOINT_PREFIX}{dropped}"]
            return new

        self._fenced.update(rid, [epoch], added)

    def pointers(self, job: JobKey) -> list[CheckpointPointer]:
        data = self._data(job)
        return [
            CheckpointPointer.model_validate_json(data[f"{CHECKPOINT_PREFIX}{checkpoint_id}"])
            for checkpoint_id in _checkpoint_ids(data)
        ]

    def counter(self, job: JobKey) -> int:
        return int(self._data(job).get(COUNTER, "-1"))

    def advance_fence(self, job: JobKey, driver_epoch: Epoch, epoch: Epoch, *, new: bool = False) -> None:
        if driver_epoch.scope != "driver":
            raise ValueError(f"advance_fence needs a driver epoch, not {driver_epoch}")
        # Writing the record (even unchanged data) stores the admitted driver term.
        rid = RecordId.of_job("checkpoints", job)
        self._fenced.update(rid, [epoch, driver_epoch], lambda d: d or {}, assume_absent=new)

    def delete(self, job: JobKey, epoch: Epoch) -> None:
        self._fenced.update(RecordId.of_job("checkpoints", job), [epoch], lambda _: None)

    def _data(self, job: JobKey) -> Mapping[str, str]:
        rid = RecordId.of_job("checkpoints", job)
        record = self._fenced.records.read(rid)
        if record is None:
            return {}
        if not record.trusted:
            UNTRUSTED_POINTERS.labels(pointer="checkpoints").inc()
            log.warning("%s %s; its pointers are ignored", rid, not_sealed(rid))
            return {}
        return record.data


def _creates_checkpoint_records(scope: FenceScope) -> bool:
    """The operator creates the record before a driver exists (advance_fence) and deletes it with the job: a
    driver that finds none belongs to a deleted job and must not revive its pointers."""
    match scope:
        case "operator":
            return True
        case "driver":
            return False
        case _:
            assert_never(scope)


def _checkpoint_ids(data: Mapping[str, str]) -> list[int]:
    """Newest first."""
    return sorted(
        (int(key.removeprefix(CHECKPOINT_PREFIX)) for key in data if key.startswith(CHECKPOINT_PREFIX)),
        reverse=True,
    )


class RecordResultStore:
    """Every entry is sealed (SealedRecords): one that is not is neither returned nor kept in the way of the
    real result, which replaces it."""

    def __init__(self, records: Records, seals: Seals) -> None:
        self._records = SealedRecords(records, seals)
        self._fenced = FencedRecords(self._records)

    def create_dirty(self, result: JobResultEntry, epoch: Epoch) -> None:
        dirty, clean = self._ids(result.uid)
        for rid in dict.fromkeys((dirty, clean)):
            record = self._records.read(rid)
            if record is not None and record.trusted:
                self._fenced.check(rid, [epoch])  # kept as it is: not even the fences are rewritten
                return
        entry = _entry_data(result.model_copy(update={"clean": False}))
        self._fenced.update(dirty, [epoch], lambda data: entry if data is None else data)

    def mark_clean(self, uid: str, epoch: Epoch) -> None:
        dirty, clean = self._ids(uid)

        def cleaned(data: Mapping[str, str] | None) -> dict[str, str]:
            if data is None:
                raise KeyError(f"no job result for {uid} (or none of this operator's)")
            return _entry_data(
                JobResultEntry.model_validate_json(data[RESULT]).model_copy(update={"clean": True})
            )

        if dirty == clean:
            self._fenced.update(clean, [epoch], cleaned)
            return
        # FLIP-194: write <uid>.json, then drop <uid>_DIRTY.json; a crash in between leaves both (clean wins).
        current = self._records.read(dirty)
        if current is None or not current.trusted:
            found = self._records.read(clean)
            if found is None or not found.trusted:
                raise KeyError(f"no job result for {uid} (or none of this operator's)")
            self._fenced.check(clean, [epoch])
            return
        self._fenced.check(dirty, [epoch])
        entry = cleaned(current.data)
        self._fenced.update(clean, [epoch], lambda data: entry if data is None else data)
        self._fenced.update(dirty, [epoch], lambda _: None)

    def get(self, uid: str) -> JobResultEntry | None:
        """UntrustedRecordError if records exist for the uid but none is one of this operator's."""
        untrusted: list[RecordId] = []
        for rid in dict.fromkeys(reversed(self._ids(uid))):  # one read where both are one record
            record = self._records.read(rid)
            if record is None:
                continue
            if entry := _entry(record):
                return entry
            untrusted.append(rid)
        if untrusted:
            raise UntrustedRecordError(f"job result record {untrusted[0]} {_NOT_SEALED}")
        return None

    def entries(self) -> list[JobResultEntry]:
        """Every sealed entry (clean wins over dirty); the others are logged and counted, one by one: none of
        them keeps the rest from being found."""
        kinds: tuple[Kind, ...] = (
            ("result-dirty", "result") if self._records.clean_results_apart else ("result",)
        )
        found: dict[str, JobResultEntry] = {}
        for kind in kinds:  # clean last: it wins over a dirty one of the same uid
            for uid, record in self._records.scan(kind).items():
                if (entry := _entry(record)) is not None:
                    found[uid] = entry
                else:
                    log.warning("job result record %s %s; ignored", RecordId(kind, uid), _NOT_SEALED)
        return [found[uid] for uid in sorted(found)]

    def delete(self, uid: str, epoch: Epoch) -> None:
        entry = self.get(uid)
        if entry is None:
            return
        if not entry.clean:
            raise ValueError(f"job result {uid} is dirty: its resources are not cleaned up yet")
        dirty, clean = self._ids(uid)
        self._fenced.update(clean, [epoch], lambda _: None)
        if dirty != clean:
            self._fenced.update(dirty, [epoch], lambda _: None)

    def _ids(self, uid: str) -> tuple[RecordId, RecordId]:
        """(dirty, clean): the same record unless the backend keeps them apart."""
        clean = RecordId("result", uid)
        return (RecordId("result-dirty", uid) if self._records.clean_results_apart else clean), clean


def _entry_data(entry: JobResultEntry) -> dict[str, str]:
    return {RESULT: entry.model_dump_json()}


def _entry(record: Record) -> JobResultEntry | None:
    """The record's entry if this operator sealed it; None (counted) otherwise."""
    if record.trusted:
        try:
            return JobResultEntry.model_validate_json(record.data[RESULT])
        except (KeyError, ValidationError):
            pass  # sealed, yet not an entry this version reads: not one to act on either
    UNTRUSTED_POINTERS.labels(pointer="result").inc()
    return None


def stores_on(
    records: Records,
    blobs: BlobStore | None,
    seal: RecordSeal,
    *,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
) -> HaStores:
    """The operator's stores; seal: its record key's (adapters.seal)."""
    seals = operator_seals(seal)
    return HaStores(
        job_graphs=RecordJobGraphStore(records, blobs, seals, threshold=payload_threshold),
        checkpoints=RecordCheckpointStore(records, seals),
        results=RecordResultStore(records, seals),
    )


def driver_checkpoint_store(records: Records, checkpoint_key: bytes) -> CheckpointStore:
    """A driver's: its job's checkpoint record, sealed with the job's checkpoint key (RecordSeal.job_key)."""
    seal = RecordSeal(checkpoint_key)
    return RecordCheckpointStore(records, lambda _: seal)
