"""JobGraphStore contract: every implementation, on its real backing service."""

from __future__ import annotations

import json
import time

import pytest

from ftspark.adapters.records import JOBGRAPH, JOBGRAPH_DIGEST, JOBGRAPH_POINTER, RecordId
from ftspark.adapters.seal import SEAL
from ftspark.domain.fencing import StaleEpochError
from ftspark.domain.ha import JobKey
from ftspark.ports.stores import StoreUnavailableError, UntrustedRecordError
from ftspark_dev.cluster.s3server import S3Server
from tests.contract.conftest import Backend, leader

LARGE = 2 * 1024 * 1024  # above the 1 MiB a ConfigMap can hold: only the indirection makes it fit


def test_round_trip_replace_and_delete(backend: Backend) -> None:
    store = backend.stores.job_graphs
    first, second = backend.graph(generation=1), backend.graph(generation=2)

    assert store.get(first.job) is None
    store.put(first, leader(1))
    assert store.get(first.job) == first
    assert store.jobs() == [first.job]
    store.put(second, leader(1))
    assert backend.reopen().job_graphs.get(first.job) == second

    store.delete(first.job, leader(1))
    assert store.get(first.job) is None
    assert store.jobs() == []
    store.delete(first.job, leader(1))  # idempotent


def test_a_deposed_leader_changes_nothing(backend: Backend) -> None:
    store = backend.stores.job_graphs
    graph = backend.graph(padding=LARGE)
    store.put(graph, leader(2))
    rid = RecordId.of_job("jobgraph", graph.job)
    before, payloads = backend.records.read(rid), backend.payloads()

    with pytest.raises(StaleEpochError):
        store.put(backend.graph(generation=9, padding=LARGE), leader(1))
    with pytest.raises(StaleEpochError):
        store.delete(graph.job, leader(1))

    assert backend.records.read(rid) == before  # data, fences and resourceVersion/ETag
    assert backend.payloads() == payloads  # the refused put left no payload behind
    assert store.get(graph.job) == graph
    store.put(backend.graph(generation=3), leader(3))  # a newer leader still writes


def test_a_write_that_expects_no_record_finds_one_and_is_fenced_all_the_same(backend: Backend) -> None:
    """new=True spares a new job's launch the read; a record there after all is read and its fences hold."""
    store = backend.stores.job_graphs
    first = backend.graph(generation=1)
    store.put(first, leader(1), new=True)
    assert store.get(first.job) == first
    store.put(backend.graph(generation=2), leader(2), new=True)  # there after all: replaced, by a CAS
    rid = RecordId.of_job("jobgraph", first.job)
    before = backend.records.read(rid)
    with pytest.raises(StaleEpochError):
        store.put(backend.graph(generation=9), leader(1), new=True)
    assert backend.records.read(rid) == before
    assert store.get(first.job) == backend.graph(generation=2)


def test_large_graph_keeps_only_a_pointer_and_delete_is_two_phase(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.stores.job_graphs
    small, large = backend.graph(), backend.graph(generation=2, padding=LARGE)
    rid = RecordId.of_job("jobgraph", large.job)

    store.put(small, leader(1))
    assert backend.payloads() == []
    store.put(large, leader(1))
    record = backend.records.read(rid)
    assert record is not None
    assert store.get(large.job) == large
    if backend.blobs is None:  # S3 records hold any size: nothing to point at
        assert set(record.data) == {JOBGRAPH, SEAL}
        return

    assert set(record.data) == {JOBGRAPH_POINTER, JOBGRAPH_DIGEST, SEAL}
    assert len(json.dumps(record.data)) < 1024
    payload = record.data[JOBGRAPH_POINTER]
    assert payload.startswith(f"{large.spec.checkpoint.storage}/ha/jobgraph-{large.uid}-")
    assert backend.payloads() == [payload]
    assert len(backend.blobs.get(payload) or b"") > LARGE

    replacement = backend.graph(generation=3, padding=LARGE)
    store.put(replacement, leader(1))
    replaced = backend.records.read(rid)
    assert replaced is not None
    assert backend.payloads() == [replaced.data[JOBGRAPH_POINTER]]  # the old payload went after the switch

    deleted: list[str] = []
    delete_payload = backend.blobs.delete

    def delete_after_the_pointer(uri: str) -> None:
        assert backend.records.read(rid) is None, "payload deleted while the pointer still names it"
        deleted.append(uri)
        delete_payload(uri)

    monkeypatch.setattr(backend.blobs, "delete", delete_after_the_pointer)
    store.delete(large.job, leader(1))
    assert deleted == [replaced.data[JOBGRAPH_POINTER]]
    assert backend.payloads() == []
    assert store.get(large.job) is None


def test_jobs_lists_every_job_for_a_new_leader(backend: Backend) -> None:
    for name in ("alpha", "beta", "gamma"):
        backend.stores.job_graphs.put(backend.graph(name), leader(1))
    assert [job.name for job in backend.reopen().job_graphs.jobs()] == ["alpha", "beta", "gamma"]


def test_jobs_lists_only_the_namespaces_the_store_is_for(networked_backend: Backend) -> None:
    """An operator that watches some namespaces never adopts (or sweeps) records of others."""
    store = networked_backend.stores.job_graphs
    mine = networked_backend.graph("mine")
    theirs = networked_backend.graph("theirs").model_copy(
        update={"job": JobKey(namespace="default", name="theirs")}
    )
    store.put(mine, leader(1))
    store.put(theirs, leader(1))
    try:
        assert networked_backend.reopen().job_graphs.jobs() == [mine.job]
    finally:
        store.delete(theirs.job, leader(1))


def test_unreachable_store_raises_store_unavailable(networked_backend: Backend) -> None:
    assert networked_backend.unreachable is not None
    store = networked_backend.unreachable().job_graphs
    graph = networked_backend.graph()
    started = time.monotonic()
    for call in (
        lambda: store.put(graph, leader(1)),
        lambda: store.get(graph.job),
        lambda: store.jobs(),
        lambda: store.delete(graph.job, leader(1)),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "target",
    [
        "victim/data/important.parquet",  # not a payload's name at all
        "victim/ha/jobgraph-uid-orders-0123456789abcdef0123456789abcdef.json",  # payload-shaped, no graph
        "copy",  # the job's own payload copied elsewhere: its graph names another place
        "other",  # another job's payload (its random name learnt somehow)
    ],
)
def test_a_pointer_to_anything_but_the_jobs_own_payload_is_neither_used_nor_deleted(
    payload_backend: Backend, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = payload_backend
    assert backend.blobs is not None
    blobs, store = backend.blobs, backend.stores.job_graphs
    graph, other = backend.graph(padding=LARGE), backend.graph("other", padding=LARGE)
    store.put(graph, leader(1))
    store.put(other, leader(1))
    own, others = (backend.records.read(RecordId.of_job("jobgraph", g.job)) for g in (graph, other))
    assert own is not None and others is not None
    bucket_root = backend.storage.rsplit("/", 1)[0]
    victim = {
        "copy": f"{bucket_root}/victim/ha/{own.data[JOBGRAPH_POINTER].rsplit('/', 1)[1]}",
        "other": others.data[JOBGRAPH_POINTER],
    }.get(target, f"{bucket_root}/{target}")
    if target != "other":
        blobs.put(victim, (blobs.get(own.data[JOBGRAPH_POINTER]) or b"") if target == "copy" else b"secret")
    backend.forge(RecordId.of_job("jobgraph", graph.job), {JOBGRAPH_POINTER: victim})
    reads: list[str] = []
    read = blobs.get

    def recorded(uri: str) -> bytes | None:
        reads.append(uri)
        return read(uri)

    monkeypatch.setattr(blobs, "get", recorded)

    with pytest.raises(UntrustedRecordError) as refused:
        store.get(graph.job)
    assert "seal" in str(refused.value) and "secret" not in str(refused.value)
    store.put(backend.graph(generation=2, padding=LARGE), leader(1))  # replaces the forged pointer
    backend.forge(RecordId.of_job("jobgraph", graph.job), {JOBGRAPH_POINTER: victim})
    store.delete(graph.job, leader(1))

    assert victim not in reads, "an unsealed pointer is never followed"
    assert read(victim) is not None
    assert store.get(graph.job) is None
    assert store.get(other.job) == other


def test_an_unreadable_object_among_the_records_does_not_hide_the_others(
    s3_backend: Backend, s3_server: S3Server
) -> None:
    """On S3 (ConfigMaps: tests/integration/test_ownership.py, with a tenant's real permissions)."""
    networked_backend = s3_backend
    graph = networked_backend.graph()
    networked_backend.stores.job_graphs.put(graph, leader(1))
    bucket = networked_backend.storage.removeprefix("s3://").split("/", 1)[0]
    # Whoever may write the root (a bucket policy may still let drivers' credentials reach graphs/).
    s3_server.client().put_object(Bucket=bucket, Key="ftspark/graphs/jobs/junk/jobgraph.json", Body=b"{")
    assert networked_backend.reopen().job_graphs.jobs() == [graph.job]


@pytest.mark.parametrize("change", ["elsewhere", "other-job"])
def test_a_sealed_pointer_whose_payload_the_tenant_rewrote_is_refused(
    payload_backend: Backend, change: str
) -> None:
    """The payload lies in the tenant's storage, which the tenant may write: its bytes are sealed too (by
    digest), so neither a graph sending the next attempt to a folder the tenant prepared nor another job's
    graph is ever returned in its place."""
    backend = payload_backend
    assert backend.blobs is not None
    store = backend.stores.job_graphs
    graph, other = backend.graph(padding=LARGE), backend.graph("other", padding=LARGE)
    store.put(graph, leader(1))
    record = backend.records.read(RecordId.of_job("jobgraph", graph.job))
    assert record is not None
    uri = record.data[JOBGRAPH_POINTER]
    forged = {
        "elsewhere": graph.model_copy(update={"checkpoint_location": "s3://victim/prepared/checkpoints"}),
        "other-job": other,
    }[change]
    backend.blobs.delete(uri)
    backend.blobs.put(uri, forged.model_dump_json().encode())

    with pytest.raises(UntrustedRecordError) as refused:
        store.get(graph.job)
    assert "changed since the operator wrote it" in str(refused.value)
