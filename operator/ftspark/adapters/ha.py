"""The HA records of the backend an installation chose (protocol.HaStoreConfig): the operator and its
drivers build them here, so both always write the same records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubernetes import client

from ftspark.adapters.k8s.configmap_stores import ConfigMapRecords
from ftspark.adapters.records import Records, driver_checkpoint_store, stores_on
from ftspark.adapters.s3.stores import S3BlobStore, S3Records
from ftspark.adapters.seal import RecordSeal
from ftspark.ports.stores import CheckpointStore, HaStores
from ftspark.protocol import HaStoreConfig

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def ha_stores(
    store: HaStoreConfig,
    api: client.ApiClient,
    s3: S3Client,
    seal: RecordSeal,
    *,
    results_namespace: str,
    namespaces: Sequence[str] = (),
) -> HaStores:
    """The operator's: namespaces, where job records are scanned (the watched ones); results_namespace:
    ConfigMaps only; seal: the operator's, on what only it writes."""
    records = _records(store, api, s3, results_namespace=results_namespace, namespaces=namespaces)
    # S3 objects hold any size: job graphs stay inline there, no payload indirection.
    return stores_on(records, None if store.kind == "s3" else S3BlobStore(s3), seal)


def checkpoint_store(
    store: HaStoreConfig,
    api: client.ApiClient,
    s3: S3Client,
    checkpoint_key: bytes,
    *,
    results_namespace: str,
    namespace: str,
) -> CheckpointStore:
    """A driver's: it writes its job's checkpoint pointers and nothing else of the HA records, sealed with the
    job's checkpoint key, which the operator gave it."""
    return driver_checkpoint_store(
        _records(store, api, s3, results_namespace=results_namespace, namespaces=(namespace,)), checkpoint_key
    )


def _records(
    store: HaStoreConfig,
    api: client.ApiClient,
    s3: S3Client,
    *,
    results_namespace: str,
    namespaces: Sequence[str],
) -> Records:
    if store.kind == "s3":
        return S3Records(s3, store.s3_root, namespaces=namespaces)
    return ConfigMapRecords(api, results_namespace=results_namespace, namespaces=namespaces)
