"""The ConfigMap stores list their records page by page: a sweep over thousands of results is many small
answers, each within the request timeout, never one huge one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes import client

from ftspark.adapters import k8s
from ftspark.adapters.k8s import configmap_stores as module
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey, JobResultEntry
from ftspark.testing.stores import MemoryBlobStore

LEADER = Epoch("operator", 1, "leader")


def test_every_record_is_found_across_pages(
    api_client: client.ApiClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(k8s, "PAGE", 2)
    stores = module.configmap_stores(
        api_client, MemoryBlobStore(), RecordSeal(RecordSeal.new_key()), results_namespace=namespace
    )
    uids = [f"uid-{n}" for n in range(5)]
    for uid in uids:
        entry = JobResultEntry(
            job=JobKey(namespace=namespace, name=uid),
            uid=uid,
            state="Succeeded",
            finished_at=datetime.now(UTC),
        )
        stores.results.create_dirty(entry, LEADER)
    assert sorted(entry.uid for entry in stores.results.entries()) == uids
