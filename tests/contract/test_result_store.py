"""ResultStore contract (FLIP-194): every implementation, on its real backing service."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ftspark.adapters.records import Kind, RecordId
from ftspark.domain.fencing import StaleEpochError
from ftspark.ports.stores import StoreUnavailableError, UntrustedRecordError
from tests.contract.conftest import Backend, leader


def _stored(backend: Backend, uid: str) -> list[object]:
    """Every raw record an entry may occupy (dirty and clean apart on S3), for before/after comparisons."""
    kinds: tuple[Kind, ...] = (
        ("result-dirty", "result") if backend.records.clean_results_apart else ("result",)
    )
    return [backend.records.read(RecordId(kind, uid)) for kind in kinds]


def test_dirty_then_clean_then_expired(backend: Backend) -> None:
    store = backend.stores.results
    entry = backend.result("u1", "Failed")
    assert store.get("u1") is None

    store.create_dirty(entry, leader(1))
    assert store.get("u1") == entry
    assert store.entries() == [entry]
    if backend.records.clean_results_apart:
        assert backend.records.read(RecordId("result-dirty", "u1")) is not None
        assert backend.records.read(RecordId("result", "u1")) is None

    store.mark_clean("u1", leader(1))
    clean = entry.model_copy(update={"clean": True})
    assert store.get("u1") == clean
    assert store.entries() == [clean]
    if backend.records.clean_results_apart:  # <uid>_DIRTY.json became <uid>.json
        assert backend.records.read(RecordId("result-dirty", "u1")) is None
    store.mark_clean("u1", leader(1))  # idempotent

    store.delete("u1", leader(1))
    assert store.get("u1") is None
    assert store.entries() == []


def test_create_dirty_never_overwrites(backend: Backend) -> None:
    store = backend.stores.results
    first = backend.result("u1", "Succeeded")
    store.create_dirty(first, leader(1))
    before = _stored(backend, "u1")

    store.create_dirty(backend.result("u1", "Failed"), leader(2))
    assert _stored(backend, "u1") == before
    assert store.get("u1") == first

    store.mark_clean("u1", leader(2))
    store.create_dirty(first, leader(2))  # a clean entry is not made dirty again either
    assert store.get("u1") == first.model_copy(update={"clean": True})


def test_a_new_leader_finds_the_dirty_entries(backend: Backend) -> None:
    store = backend.stores.results
    for uid in ("a", "b", "c"):
        store.create_dirty(backend.result(uid), leader(1))
    store.mark_clean("b", leader(1))

    entries = backend.reopen().results.entries()
    assert [(entry.uid, entry.clean) for entry in entries] == [("a", False), ("b", True), ("c", False)]


def test_a_deposed_leader_changes_nothing(backend: Backend) -> None:
    store = backend.stores.results
    store.create_dirty(backend.result("u1"), leader(2))
    store.create_dirty(backend.result("u2"), leader(2))
    store.mark_clean("u2", leader(2))
    before = [_stored(backend, uid) for uid in ("u1", "u2")]

    refused: list[Callable[[], None]] = [
        lambda: store.create_dirty(backend.result("u1"), leader(1)),
        lambda: store.mark_clean("u1", leader(1)),
        lambda: store.mark_clean("u2", leader(1)),
        lambda: store.delete("u2", leader(1)),
    ]
    for call in refused:
        with pytest.raises(StaleEpochError):
            call()

    assert [_stored(backend, uid) for uid in ("u1", "u2")] == before  # data, fences, versions


def test_only_clean_entries_expire(backend: Backend) -> None:
    store = backend.stores.results
    store.create_dirty(backend.result("u1"), leader(1))
    with pytest.raises(ValueError, match="dirty"):
        store.delete("u1", leader(1))
    with pytest.raises(KeyError):
        store.mark_clean("unknown", leader(1))
    store.delete("unknown", leader(1))
    assert store.get("u1") == backend.result("u1")


def test_unreachable_store_raises_store_unavailable(networked_backend: Backend) -> None:
    assert networked_backend.unreachable is not None
    store = networked_backend.unreachable().results
    started = time.monotonic()
    for call in (
        lambda: store.create_dirty(networked_backend.result("u1"), leader(1)),
        lambda: store.mark_clean("u1", leader(1)),
        lambda: store.get("u1"),
        lambda: store.entries(),
        lambda: store.delete("u1", leader(1)),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("forgery", ["unsealed", "copied from another uid"])
def test_a_result_the_operator_did_not_write_is_never_taken_for_the_jobs(
    backend: Backend, forgery: str
) -> None:
    """A forged result would end its job for good (a result keeps a job from running again), make a new
    leader delete the job's pods (a dirty one) and, once expired, have the operator delete what it names."""
    store = backend.stores.results
    store.create_dirty(backend.result("mine"), leader(1))
    store.mark_clean("mine", leader(1))
    genuine = backend.records.read(RecordId("result", "mine"))
    assert genuine is not None
    victim = backend.result("victim").model_copy(update={"clean": True, "data": ("s3://victim-bucket/all/",)})
    forged = {
        "unsealed": {"result": victim.model_dump_json()},
        "copied from another uid": dict(genuine.data),
    }[forgery]
    backend.forge(RecordId("result", "victim"), forged)

    with pytest.raises(UntrustedRecordError):
        store.get("victim")
    assert [entry.uid for entry in store.entries()] == ["mine"], "a forged record is not listed"
    # The job's real result, when it comes, replaces the forgery.
    real = backend.result("victim", "Failed")
    store.create_dirty(real, leader(1))
    store.mark_clean("victim", leader(1))
    assert store.get("victim") == real.model_copy(update={"clean": True})


def test_on_s3_a_dirty_result_copied_as_clean_stays_dirty(s3_backend: Backend) -> None:
    """Where dirty and clean are records apart, the seal names the kind: a dirty one copied to the clean
    name does not verify, so its job's cleanup is not skipped."""
    store = s3_backend.stores.results
    entry = s3_backend.result("u1", "Failed")
    store.create_dirty(entry, leader(1))
    dirty = s3_backend.records.read(RecordId("result-dirty", "u1"))
    assert dirty is not None
    s3_backend.forge(RecordId("result", "u1"), dict(dirty.data))
    assert store.get("u1") == entry and not entry.clean
    assert store.entries() == [entry]


def test_an_unreadable_result_record_does_not_hide_the_others(backend: Backend) -> None:
    store = backend.stores.results
    entry = backend.result("u1", "Failed")
    store.create_dirty(entry, leader(1))
    backend.forge(RecordId("result", "junk"), {"result": "{"})
    assert store.entries() == [entry]
