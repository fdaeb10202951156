"""CheckpointStore contract: every implementation, on its real backing service."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ftspark.adapters.records import ConflictError, Record, RecordId, driver_checkpoint_store, stores_on
from ftspark.adapters.s3.stores import S3Records
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import RetiredRecordError, StaleEpochError
from ftspark.domain.ha import JobKey
from ftspark.handlers.watch import CHECKPOINT_REPORTS
from ftspark.ports.stores import StoreUnavailableError
from ftspark_dev.cluster.s3server import S3Server
from tests.contract.conftest import Backend, driver, leader, pointer


def test_round_trip_keeps_the_newest_retained(backend: Backend) -> None:
    store, job = backend.stores.checkpoints, backend.job()
    assert store.pointers(job) == []
    assert store.counter(job) == -1

    for checkpoint_id in range(5):
        store.add(job, pointer(checkpoint_id), leader(1), retained=3)

    assert store.pointers(job) == [pointer(4), pointer(3), pointer(2)]
    assert store.counter(job) == 4
    record = backend.records.read(RecordId.of_job("checkpoints", job))
    assert record is not None
    assert set(record.data) == {"counter", "checkpoint-4", "checkpoint-3", "checkpoint-2", "seal"}

    store.add(job, pointer(7), leader(1), retained=1)
    assert backend.reopen().checkpoints.pointers(job) == [pointer(7)]

    store.delete(job, leader(1))
    assert store.pointers(job) == []
    assert store.counter(job) == -1


def test_the_counter_never_goes_backwards(backend: Backend) -> None:
    store, job = backend.stores.checkpoints, backend.job()
    store.add(job, pointer(4), leader(1), retained=3)
    before = backend.records.read(RecordId.of_job("checkpoints", job))

    for repeated in (4, 2, 0):
        with pytest.raises(ValueError, match="not above counter 4"):
            store.add(job, pointer(repeated), leader(1), retained=3)

    assert backend.records.read(RecordId.of_job("checkpoints", job)) == before
    assert store.counter(job) == 4


def test_a_deposed_leader_changes_nothing(backend: Backend) -> None:
    store, job = backend.stores.checkpoints, backend.job()
    store.add(job, pointer(1), leader(2), retained=3)
    rid = RecordId.of_job("checkpoints", job)
    before = backend.records.read(rid)

    with pytest.raises(StaleEpochError):
        store.add(job, pointer(2), leader(1), retained=3)
    with pytest.raises(StaleEpochError):
        store.advance_fence(job, driver(1), leader(1))
    with pytest.raises(StaleEpochError):
        store.delete(job, leader(1))

    assert backend.records.read(rid) == before  # data, fences and resourceVersion/ETag
    assert store.pointers(job) == [pointer(1)]


def test_a_stale_driver_is_refused_after_the_fence_advances(backend: Backend) -> None:
    store, job = backend.stores.checkpoints, backend.job()
    rid = RecordId.of_job("checkpoints", job)
    store.advance_fence(job, driver(1), leader(1))  # before attempt 1's pod exists: no checkpoint yet
    assert store.counter(job) == -1
    store.add(job, pointer(1, attempt=1), driver(1), retained=3)

    store.advance_fence(job, driver(2), leader(1))
    before = backend.records.read(rid)
    with pytest.raises(StaleEpochError, match="driver term 2"):
        store.add(job, pointer(2, attempt=1), driver(1), retained=3)
    with pytest.raises(StaleEpochError):
        store.advance_fence(job, driver(1), leader(1))  # the fence never moves back either
    assert backend.records.read(rid) == before

    store.add(job, pointer(2, attempt=2), driver(2), retained=3)
    assert store.pointers(job) == [pointer(2, attempt=2), pointer(1, attempt=1)]


def test_a_fence_advance_that_expects_no_record_finds_one_and_is_fenced_all_the_same(
    backend: Backend,
) -> None:
    store, job = backend.stores.checkpoints, backend.job()
    store.advance_fence(job, driver(1), leader(1), new=True)
    store.add(job, pointer(1, attempt=1), driver(1), retained=3)
    store.advance_fence(job, driver(2), leader(1), new=True)  # there after all: its pointers kept
    assert store.pointers(job) == [pointer(1, attempt=1)]
    with pytest.raises(StaleEpochError):
        store.add(job, pointer(2, attempt=1), driver(1), retained=3)
    with pytest.raises(StaleEpochError):
        store.advance_fence(job, driver(1), leader(1), new=True)  # never back, read or not


def test_a_write_based_on_a_stale_read_is_retried(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer lands between our read and our conditional write: ours must fail, re-read and retry."""
    store, job, other = backend.stores.checkpoints, backend.job(), backend.reopen().checkpoints
    conflicts: list[str] = []
    read, replace, create = backend.records.read, backend.records.replace, backend.records.create

    def read_then_interfere(rid: RecordId) -> Record | None:
        record = read(rid)
        if not conflicts:
            conflicts.append("interfering")
            other.add(job, pointer(2), leader(1), retained=5)
        return record

    def counting(write: Callable[..., None]) -> Callable[..., None]:
        def counted(*args: Any) -> None:
            try:
                write(*args)
            except ConflictError:
                conflicts.append("conflict")
                raise

        return counted

    monkeypatch.setattr(backend.records, "read", read_then_interfere)
    monkeypatch.setattr(backend.records, "create", counting(create))
    monkeypatch.setattr(backend.records, "replace", counting(replace))
    store.add(job, pointer(3), leader(1), retained=5)

    assert conflicts == ["interfering", "conflict"]
    assert other.pointers(job) == [pointer(3), pointer(2)]


def test_concurrent_writers_never_lose_an_update(backend: Backend) -> None:
    job, writers, per_writer = backend.job(), 6, 8
    ids = itertools.count()
    lock, start = threading.Lock(), threading.Barrier(writers)
    acknowledged: list[int] = []
    failures: list[BaseException] = []

    def write() -> None:
        store = backend.reopen().checkpoints  # one client per writer, as separate processes would have
        start.wait()
        for _ in range(per_writer):
            with lock:
                checkpoint_id = next(ids)
            try:
                store.add(job, pointer(checkpoint_id), leader(1), retained=100)
            except ValueError:
                continue  # a higher id landed first: refusing this one is the contract
            except BaseException as error:
                failures.append(error)
                return
            with lock:
                acknowledged.append(checkpoint_id)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    stored = [p.checkpoint_id for p in backend.stores.checkpoints.pointers(job)]
    assert stored == sorted(acknowledged, reverse=True)  # every acknowledged add is there
    assert backend.stores.checkpoints.counter(job) == max(acknowledged)


def test_unreachable_store_raises_store_unavailable(networked_backend: Backend) -> None:
    assert networked_backend.unreachable is not None
    store, job = networked_backend.unreachable().checkpoints, networked_backend.job()
    started = time.monotonic()
    for call in (
        lambda: store.add(job, pointer(1), leader(1), retained=3),
        lambda: store.pointers(job),
        lambda: store.counter(job),
        lambda: store.advance_fence(job, driver(1), leader(1)),
        lambda: store.delete(job, leader(1)),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    assert time.monotonic() - started < 30


def test_conditional_writes_refuse_a_stale_version(backend: Backend) -> None:
    """The backend's own condition (resourceVersion precondition, If-Match/If-None-Match), below the loop."""
    job = backend.job()
    backend.stores.checkpoints.add(job, pointer(1), leader(1), retained=3)
    rid = RecordId.of_job("checkpoints", job)
    first = backend.records.read(rid)
    assert first is not None
    backend.reopen().checkpoints.add(job, pointer(2), leader(1), retained=3)  # a concurrent modification
    current = backend.records.read(rid)

    with pytest.raises(ConflictError):
        backend.records.replace(rid, {"counter": "99"}, first.fences, "intruder", first.version)
    with pytest.raises(ConflictError):
        backend.records.create(rid, {"counter": "99"}, first.fences, "intruder")
    with pytest.raises(ConflictError):
        backend.records.remove(rid, first.version)
    assert backend.records.read(rid) == current


def test_a_driver_never_revives_a_deleted_record(backend: Backend) -> None:
    """The operator deletes a job's record with the job; a driver still running then writes nothing."""
    store, job = backend.stores.checkpoints, backend.job()
    rid = RecordId.of_job("checkpoints", job)
    store.advance_fence(job, driver(1), leader(1))
    store.add(job, pointer(1, attempt=1), driver(1), retained=3)
    store.delete(job, leader(1))

    with pytest.raises(RetiredRecordError, match="deleted"):
        store.add(job, pointer(2, attempt=1), driver(1), retained=3)
    assert backend.records.read(rid) is None

    store.advance_fence(job, driver(1), leader(1))  # a new job of the same name starts at attempt 1 again
    store.add(job, pointer(0, attempt=1), driver(1), retained=3)
    assert store.pointers(job) == [pointer(0, attempt=1)]


@pytest.mark.parametrize("forgery", ["fences raised", "pointers of its own", "another job's record"])
def test_a_checkpoint_record_without_the_jobs_seal_is_neither_obeyed_nor_followed(
    backend: Backend, forgery: str
) -> None:
    """Every job's driver writes where checkpoint records live (on S3 with its own credentials, under the
    one root): without the victim's checkpoint key it can neither fence the victim out for good nor point
    its recovery at a checkpoint of its choosing."""
    job, other = backend.job(), backend.job("other")
    store = backend.stores.checkpoints  # the operator's
    rid = RecordId.of_job("checkpoints", job)
    for key in (job, other):
        store.advance_fence(key, driver(1), leader(1), new=True)
        # The job's driver, with the key its attempt's Secret gives it: its pointers are the job's.
        driver_checkpoint_store(backend.records, backend.seal.job_key(str(key))).add(
            key, pointer(1, attempt=1), driver(1), retained=3
        )
    assert store.pointers(job) == [pointer(1, attempt=1)]
    genuine, theirs = (backend.records.read(r) for r in (rid, RecordId.of_job("checkpoints", other)))
    assert genuine is not None and theirs is not None
    planted = pointer(9).model_copy(update={"location": "s3://attacker/prepared/commits/9"})
    data, fences = {
        "fences raised": (dict(genuine.data), {"operator": 2**62, "driver": 2**62}),
        "pointers of its own": ({"counter": "9", "checkpoint-9": planted.model_dump_json()}, None),
        "another job's record": (dict(theirs.data), dict(theirs.fences)),
    }[forgery]
    backend.forge(rid, data, fences)

    assert store.pointers(job) == [] and store.counter(job) == -1
    assert backend.reopen().checkpoints.pointers(job) == []
    # Its driver finds the record gone (as if the job were deleted) and writes nothing there.
    with pytest.raises(RetiredRecordError):
        driver_checkpoint_store(backend.records, backend.seal.job_key(str(job))).add(
            job, pointer(2, attempt=1), driver(1), retained=3
        )
    # The next attempt's fence advance replaces the forgery, whatever fences it claims.
    store.advance_fence(job, driver(2), leader(1))
    store.add(job, pointer(2, attempt=2), driver(2), retained=3)
    assert store.pointers(job) == [pointer(2, attempt=2)]
    assert store.pointers(other) == [pointer(1, attempt=1)]


def test_on_s3_a_listing_tells_whose_checkpoints_changed(s3_server: S3Server) -> None:
    """What the operator polls where it cannot watch: versions of the checkpoint records of the namespaces it
    manages, changed by every report and by nothing else."""
    s3 = s3_server.client()
    bucket = f"ha-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    records = S3Records(s3, f"s3://{bucket}/ftspark", namespaces=("jobs",))
    stores = stores_on(records, None, RecordSeal(RecordSeal.new_key()))
    mine, other, theirs = (
        JobKey(namespace=ns, name=n) for ns, n in (("jobs", "a"), ("jobs", "b"), ("x", "c"))
    )
    for job in (mine, other, theirs):
        stores.checkpoints.advance_fence(job, driver(1), leader(1))
    before = records.checkpoint_versions()
    assert set(before) == {mine, other}
    stores.checkpoints.add(mine, pointer(0), driver(1), retained=3)
    stores.checkpoints.add(theirs, pointer(0), driver(1), retained=3)
    after = records.checkpoint_versions()
    assert after[mine] != before[mine]
    assert after[other] == before[other]


@pytest.mark.parametrize("backend", ["configmap"], indirect=True)
def test_the_operators_watch_receives_the_records_a_driver_wrote_last(
    backend: Backend, api_client: client.ApiClient
) -> None:
    """Its own fence advances report no checkpoint: the API server leaves them out of the watch."""
    store, job, core = backend.stores.checkpoints, backend.job(), client.CoreV1Api(api_client)

    def selected() -> list[str]:
        found = core.list_namespaced_config_map(backend.namespace, label_selector=CHECKPOINT_REPORTS).items
        return [item.metadata.name for item in found]

    store.advance_fence(job, driver(1), leader(1), new=True)
    assert selected() == []
    store.add(job, pointer(1, attempt=1), driver(1), retained=3)
    assert selected() == [f"{job.name}-checkpoints"]
    store.advance_fence(job, driver(2), leader(1))
    assert selected() == []
