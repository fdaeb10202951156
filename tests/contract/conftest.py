"""The `backend` fixture: each HA store implementation on its real backing service, in a fresh place per test.

memory: the dict-backed records; configmap: ConfigMaps on the real kube-apiserver in a fresh namespace, large
payloads on the S3-protocol server; s3: objects on the S3 server (ftspark_dev.cluster.s3server) in a fresh
bucket.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config
from kubernetes import client

from ftspark.adapters.k8s.configmap_stores import ConfigMapRecords, configmap_stores
from ftspark.adapters.records import RecordId, Records, stores_on
from ftspark.adapters.s3.stores import S3BlobStore, S3Records, s3_stores
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, JobGraph, JobKey, JobResultEntry
from ftspark.domain.models import BatchFigures, CheckpointSpec, DriverSpec, JobSpec
from ftspark.ports.blobs import BlobStore
from ftspark.ports.stores import HaStores
from ftspark.testing.stores import MemoryBlobStore, MemoryRecords
from ftspark_dev.cluster.processes import free_port
from ftspark_dev.cluster.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def leader(term: int) -> Epoch:
    return Epoch(scope="operator", term=term, holder=f"operator-{term}")


def driver(attempt: int) -> Epoch:
    return Epoch(scope="driver", term=attempt, holder=f"driver-attempt-{attempt}")


def pointer(checkpoint_id: int, attempt: int = 0) -> CheckpointPointer:
    return CheckpointPointer(
        checkpoint_id=checkpoint_id,
        batch_id=checkpoint_id,
        location=f"s3://bucket/checkpoints/commits/{checkpoint_id}",
        completed_at=NOW,
        attempt=attempt,
        source_end_offsets={"kafka": f'{{"events":{{"0":{checkpoint_id * 10}}}}}'},
        figures=BatchFigures(duration_ms=checkpoint_id * 100, input_rows_per_second=0.5, state_bytes=2**40),
    )


@dataclass
class Backend:
    name: str
    namespace: str
    storage: str  # s3:// root under which test jobs keep their storage (and large job-graph payloads)
    records: Records  # what `stores` writes through: tests read raw records (data, fences, version) here
    blobs: BlobStore | None
    payloads: Callable[[], list[str]]  # URIs of the large job-graph payloads that exist
    reopen: Callable[[], HaStores]  # the same backing store seen by another process (a new leader)
    unreachable: Callable[[], HaStores] | None
    seal: RecordSeal  # the installation's: `stores` and `reopen` share it, as an operator's replicas do
    stores: HaStores = field(init=False)

    def __post_init__(self) -> None:
        self.stores = stores_on(self.records, self.blobs, self.seal)

    def forge(self, rid: RecordId, data: dict[str, str], fences: dict[str, int] | None = None) -> None:
        """What a writer without the keys may do where records live (the job's or the operator's namespace,
        or the S3 store's root, which every driver's credentials reach): write any record, fences included."""
        current = self.records.read(rid)
        if current is None:
            self.records.create(rid, data, fences or {}, "tenant")
        else:
            self.records.replace(
                rid, data, current.fences if fences is None else fences, "tenant", current.version
            )

    def job(self, name: str = "orders") -> JobKey:
        return JobKey(namespace=self.namespace, name=name)

    def graph(self, name: str = "orders", *, generation: int = 1, padding: int = 0) -> JobGraph:
        storage = f"{self.storage}/{name}"
        spec = JobSpec(
            image="spark:4.0.1",
            main_application_file="local:///opt/app/job.py",
            checkpoint=CheckpointSpec(storage=storage),
            # Big graphs come from pod templates (sparkConf and env must fit the driver's environment).
            driver=DriverSpec(pod_template={"metadata": {"annotations": {"padding": "x" * padding}}})
            if padding
            else DriverSpec(),
        )
        return JobGraph(
            job=self.job(name),
            uid=f"uid-{name}",
            generation=generation,
            spec_hash=f"hash-{generation}-{padding}",
            spec=spec,
            checkpoint_location=f"{storage}/checkpoints",
            submitted_at=NOW,
        )

    def result(self, uid: str, state: str = "Succeeded") -> JobResultEntry:
        return JobResultEntry.model_validate(
            {"job": self.job(f"job-{uid}"), "uid": uid, "state": state, "finished_at": NOW}
        )


@pytest.fixture(params=["memory", "configmap", "s3"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return _build(request)


@pytest.fixture(params=["configmap", "s3"])
def networked_backend(request: pytest.FixtureRequest) -> Backend:
    """The backends behind a network endpoint (memory has none to lose)."""
    return _build(request)


@pytest.fixture(params=["memory", "configmap"])
def payload_backend(request: pytest.FixtureRequest) -> Backend:
    """The backends whose large job graphs point at a payload (an S3 record holds any size)."""
    return _build(request)


@pytest.fixture(params=["s3"])
def s3_backend(request: pytest.FixtureRequest) -> Backend:
    return _build(request)


def _build(request: pytest.FixtureRequest) -> Backend:
    builders: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {
        "memory": _memory,
        "configmap": _configmap,
        "s3": _s3,
    }
    return builders[request.param](request)


def _memory(request: pytest.FixtureRequest) -> Backend:
    records, blobs, seal = MemoryRecords(), MemoryBlobStore(), _seal()
    return Backend(
        name="memory",
        namespace="jobs",
        storage="s3://memory-bucket/jobs",
        records=records,
        blobs=blobs,
        payloads=lambda: sorted(blobs.objects),
        reopen=lambda: stores_on(records, blobs, seal),
        unreachable=None,
        seal=seal,
    )


def _configmap(request: pytest.FixtureRequest) -> Backend:
    api: client.ApiClient = request.getfixturevalue("api_client")
    namespace: str = request.getfixturevalue("namespace")
    s3 = request.getfixturevalue("s3_server").client()
    bucket = _fresh_bucket(s3)
    blobs, seal = S3BlobStore(s3), _seal()

    def stores_via(api_client: client.ApiClient, timeout: float = 10.0) -> HaStores:
        return configmap_stores(
            api_client,
            blobs,
            seal,
            results_namespace=namespace,
            namespaces=(namespace,),
            request_timeout=timeout,
        )

    def unreachable() -> HaStores:
        configuration = copy.deepcopy(api.configuration)
        configuration.host = f"https://127.0.0.1:{free_port()}"
        configuration.retries = 0
        return stores_via(client.ApiClient(configuration), timeout=2.0)

    return Backend(
        name="configmap",
        namespace=namespace,
        storage=f"s3://{bucket}/jobs",
        records=ConfigMapRecords(api, results_namespace=namespace, namespaces=(namespace,)),
        blobs=blobs,
        payloads=lambda: _keys(s3, bucket, "jobs/"),
        reopen=lambda: stores_via(api),
        unreachable=unreachable,
        seal=seal,
    )


def _s3(request: pytest.FixtureRequest) -> Backend:
    server: S3Server = request.getfixturevalue("s3_server")
    s3 = server.client()
    bucket = _fresh_bucket(s3)
    root, seal = f"s3://{bucket}/ftspark", _seal()

    def unreachable() -> HaStores:
        dead = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{free_port()}",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(connect_timeout=1, read_timeout=1, retries={"max_attempts": 1}),
        )
        return s3_stores(dead, root, seal, namespaces=("jobs",))

    return Backend(
        name="s3",
        namespace="jobs",
        storage=f"s3://{bucket}/jobs",
        records=S3Records(s3, root, namespaces=("jobs",)),
        blobs=None,
        payloads=lambda: _keys(s3, bucket, "jobs/"),
        reopen=lambda: s3_stores(server.client(), root, seal, namespaces=("jobs",)),
        unreachable=unreachable,
        seal=seal,
    )


def _seal() -> RecordSeal:
    return RecordSeal(RecordSeal.new_key())


def _fresh_bucket(s3: S3Client) -> str:
    bucket = f"ha-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    return bucket


def _keys(s3: S3Client, bucket: str, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(f"s3://{bucket}/{item['Key']}" for item in listed.get("Contents", []))
