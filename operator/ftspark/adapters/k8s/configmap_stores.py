"""The HA stores on ConfigMaps (Flink's Kubernetes HA services), large job-graph payloads in a BlobStore (S3).

Layout (record data keys: adapters.records):

    <job>-jobgraph        in the job's namespace, labels ftspark.io/job=<job>, ftspark.io/store=jobgraph
    <job>-checkpoints     in the job's namespace, labels ftspark.io/job=<job>, ftspark.io/store=checkpoints
    ftspark-result-<uid>  in the results namespace (the operator's), label ftspark.io/result=true

Every one carries its fences as annotations ftspark.io/fence-operator and ftspark.io/fence-driver (the highest
term that wrote it per scope), ftspark.io/written-by (the last writer's epochs, for people), and the label
ftspark.io/writer (the last writer's scope, operator or driver: the operator's watch of checkpoint records
selects by it, so its own fence advances never come back to it). Writes are compare-and-swap on
metadata.resourceVersion (create: AlreadyExists; replace and delete: a precondition).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, assert_never

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark.adapters.k8s import pages, without_answer
from ftspark.adapters.k8s import request_timeout as k8s_request_timeout
from ftspark.adapters.records import (
    DEFAULT_PAYLOAD_THRESHOLD,
    ConflictError,
    Kind,
    Record,
    RecordId,
    stores_on,
)
from ftspark.adapters.seal import RecordSeal
from ftspark.ports.blobs import BlobStore
from ftspark.ports.stores import HaStores, StoreUnavailableError
from ftspark.protocol import JOB_LABEL

STORE_LABEL = "ftspark.io/store"
WRITER_LABEL = "ftspark.io/writer"
RESULT_LABEL = "ftspark.io/result"
FENCE_ANNOTATION_PREFIX = "ftspark.io/fence-"
WRITER_ANNOTATION = "ftspark.io/written-by"
RESULT_PREFIX = "ftspark-result-"

log = logging.getLogger(__name__)


class ConfigMapRecords:
    clean_results_apart = False

    def __init__(
        self,
        api: client.ApiClient,
        *,
        results_namespace: str,
        namespaces: Sequence[str] = (),
        request_timeout: float = 10.0,
    ) -> None:
        """namespaces limits scan() of job records to those (namespaced RBAC); empty: all of them."""
        self._core = client.CoreV1Api(api)
        self._results_namespace = results_namespace
        self._namespaces = tuple(namespaces)
        self._timeout = k8s_request_timeout(request_timeout)

    def read(self, rid: RecordId) -> Record | None:
        namespace, name = self._locate(rid)
        found = _call(
            f"read ConfigMap {namespace}/{name}",
            lambda: self._core.read_namespaced_config_map(name, namespace, _request_timeout=self._timeout),
            absent=(404,),
        )
        return None if found is None else _record(found)

    def create(self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str) -> None:
        namespace, name = self._locate(rid)
        body = self._body(rid, data, fences, writer, None)
        _call(
            f"create ConfigMap {namespace}/{name}",
            lambda: without_answer(
                self._core.create_namespaced_config_map, namespace, body, _request_timeout=self._timeout
            ),
            conflicts=(409,),
        )

    def replace(
        self, rid: RecordId, data: Mapping[str, str], fences: Mapping[str, int], writer: str, version: str
    ) -> None:
        namespace, name = self._locate(rid)
        body = self._body(rid, data, fences, writer, version)
        _call(
            f"replace ConfigMap {namespace}/{name}",
            lambda: without_answer(
                self._core.replace_namespaced_config_map,
                name,
                namespace,
                body,
                _request_timeout=self._timeout,
            ),
            conflicts=(404, 409),
        )

    def remove(self, rid: RecordId, version: str) -> None:
        namespace, name = self._locate(rid)
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=version))
        _call(
            f"delete ConfigMap {namespace}/{name}",
            lambda: without_answer(
                self._core.delete_namespaced_config_map,
                name,
                namespace,
                body=options,
                _request_timeout=self._timeout,
            ),
            conflicts=(409,),
            absent=(404,),
        )

    def scan(self, kind: Kind) -> dict[str, Record]:
        selector = f"{RESULT_LABEL}=true" if _is_result(kind) else f"{STORE_LABEL}={kind}"
        namespaces = (self._results_namespace,) if _is_result(kind) else self._namespaces
        found: dict[str, Record] = {}
        for namespace in namespaces or (None,):
            listed = _call(
                f"list ConfigMaps {selector} in {namespace or 'every namespace'}",
                functools.partial(self._list, namespace, selector),
            )
            for item in listed:
                key = _key(kind, item)
                try:
                    # A label selects, the name decides (it is what read() finds): anyone who may create a
                    # ConfigMap can label one, and one unreadable item must not hide the others.
                    if key is None:
                        raise ValueError("its name is not one of a record of this kind")
                    found[key] = _record(item)
                except ValueError as error:
                    meta = item.metadata
                    log.warning(
                        "ConfigMap %s/%s labelled %s skipped: %s", meta.namespace, meta.name, selector, error
                    )
        return found

    def _list(self, namespace: str | None, selector: str) -> list[Any]:
        list_call = (
            self._core.list_config_map_for_all_namespaces
            if namespace is None
            else functools.partial(self._core.list_namespaced_config_map, namespace)
        )
        found = pages(
            list_call,
            lambda page: page.metadata._continue,
            label_selector=selector,
            _request_timeout=self._timeout,
        )
        return [item for page in found for item in page.items]

    def _locate(self, rid: RecordId) -> tuple[str, str]:
        if _is_result(rid.kind):
            return self._results_namespace, f"{RESULT_PREFIX}{rid.key}"
        job = rid.job()
        return job.namespace, f"{job.name}-{rid.kind}"

    def _body(
        self,
        rid: RecordId,
        data: Mapping[str, str],
        fences: Mapping[str, int],
        writer: str,
        version: str | None,
    ) -> client.V1ConfigMap:
        namespace, name = self._locate(rid)
        labels = (
            {RESULT_LABEL: "true"}
            if _is_result(rid.kind)
            else {JOB_LABEL: rid.job().name, STORE_LABEL: rid.kind}
        )
        labels[WRITER_LABEL] = writer.partition(" ")[0]  # FencedRecords names the first epoch's scope first
        annotations = {f"{FENCE_ANNOTATION_PREFIX}{scope}": str(term) for scope, term in fences.items()}
        annotations[WRITER_ANNOTATION] = writer
        metadata = client.V1ObjectMeta(
            name=name, namespace=namespace, labels=labels, annotations=annotations, resource_version=version
        )
        return client.V1ConfigMap(metadata=metadata, data=dict(data))


def _record(config_map: Any) -> Record:
    annotations: dict[str, str] = config_map.metadata.annotations or {}
    fences = {
        key.removeprefix(FENCE_ANNOTATION_PREFIX): int(value)
        for key, value in annotations.items()
        if key.startswith(FENCE_ANNOTATION_PREFIX)
    }
    return Record(dict(config_map.data or {}), fences, config_map.metadata.resource_version)


def _is_result(kind: Kind) -> bool:
    """Results live in the results namespace, named by uid; the other records beside their job."""
    match kind:
        case "result":
            return True
        case "jobgraph" | "checkpoints":
            return False
        case "result-dirty":
            raise ValueError("ConfigMaps keep a dirty result in its clean record (clean_results_apart)")
        case _:
            assert_never(kind)


def _key(kind: Kind, config_map: Any) -> str | None:
    """The record key _locate gives this ConfigMap's name; None if its name is not a record's of the kind."""
    name: str = config_map.metadata.name
    if _is_result(kind):
        return name.removeprefix(RESULT_PREFIX) if name.startswith(RESULT_PREFIX) else None
    job = name.removesuffix(f"-{kind}")
    return f"{config_map.metadata.namespace}/{job}" if job != name else None


def _call(
    what: str, request: Callable[[], Any], *, conflicts: tuple[int, ...] = (), absent: tuple[int, ...] = ()
) -> Any:
    """The request's answer, None for an `absent` status; ConflictError or StoreUnavailableError otherwise."""
    try:
        return request()
    except ApiException as error:
        if error.status in absent:
            return None
        if error.status in conflicts:
            raise ConflictError(what) from error
        raise StoreUnavailableError(
            f"{what}: the API server answered {error.status} {error.reason}"
        ) from error
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise StoreUnavailableError(f"{what}: the API server is unreachable: {error}") from error


def configmap_stores(
    api: client.ApiClient,
    blobs: BlobStore,
    seal: RecordSeal,
    *,
    results_namespace: str,
    namespaces: Sequence[str] = (),
    request_timeout: float = 10.0,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
) -> HaStores:
    records = ConfigMapRecords(
        api, results_namespace=results_namespace, namespaces=namespaces, request_timeout=request_timeout
    )
    return stores_on(records, blobs, seal, payload_threshold=payload_threshold)
