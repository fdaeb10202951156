"""The HA stores of the backend an installation chose (protocol.HaStoreConfig): the operator and its
drivers build them here, so both always write the same records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubernetes import client

from ftspark.adapters.k8s.configmap_stores import configmap_stores
from ftspark.adapters.records import HaStores
from ftspark.adapters.s3.stores import S3BlobStore, s3_stores
from ftspark.protocol import HaStoreConfig

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def ha_stores(
    store: HaStoreConfig,
    api: client.ApiClient,
    s3: S3Client,
    *,
    results_namespace: str,
    namespaces: Sequence[str] = (),
) -> HaStores:
    """namespaces: where job records are scanned (the watched ones); results_namespace: ConfigMaps only."""
    if store.kind == "s3":
        return s3_stores(s3, store.s3_root, namespaces=namespaces)
    return configmap_stores(api, S3BlobStore(s3), results_namespace=results_namespace, namespaces=namespaces)
