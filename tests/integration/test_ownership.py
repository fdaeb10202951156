"""The operator deletes and reads only what it owns, against a tenant who may write ConfigMaps in its
namespace (as the driver's ServiceAccount may): the reconciler in-process, on the real API server (RBAC on,
the tenant a non-admin user) and the S3 server, whose every request to another tenant's bucket is recorded."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import KubeDrivers, KubeEvents, KubeJobs
from ftspark.adapters.k8s.configmap_stores import RESULT_LABEL, STORE_LABEL, configmap_stores
from ftspark.adapters.k8s.driver_logs import KubeDriverLogs
from ftspark.adapters.s3.inspector import S3CheckpointInspector
from ftspark.adapters.s3.stores import S3BlobStore
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, JobKey
from ftspark.ports.stores import HaStores
from ftspark.protocol import JOB_LABEL
from ftspark.reconcile.nodes import NodeWatch
from ftspark.reconcile.reconciler import Reconciler
from ftspark.reconcile.settings import DriverSettings, Ports
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import event_reasons, job_manifest, pod_names, set_driver_exited
from ftspark_dev.cluster.s3server import S3Server

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

VICTIM_KEY = "data/important.parquet"
LEADER = Epoch("operator", 1, "ownership-test")


@dataclass
class World:
    ns: str
    api: client.ApiClient
    tenant: client.CoreV1Api  # a user who may only read and write ConfigMaps in ns
    bucket: str
    victim_bucket: str  # another tenant's: the operator's credentials reach it, this job's must not
    victim_requests: list[str]  # what the operator's S3 client asked of the victim bucket
    stores: HaStores
    reconciler: Reconciler
    s3: S3Client = field(repr=False)

    @property
    def victim(self) -> str:
        return f"s3://{self.victim_bucket}/{VICTIM_KEY}"

    def victim_exists(self) -> bool:
        listed = self.s3.list_objects_v2(Bucket=self.victim_bucket, Prefix=VICTIM_KEY)
        return bool(listed.get("KeyCount"))

    def reconcile(self, name: str) -> None:
        self.reconciler.reconcile(JobKey(namespace=self.ns, name=name))

    def create_job(self, name: str) -> str:
        body = client.CustomObjectsApi(self.api).create_namespaced_custom_object(
            API_GROUP, API_VERSION, self.ns, PLURAL, job_manifest(name, self.bucket)
        )
        uid: str = body["metadata"]["uid"]
        return uid

    def delete_job(self, name: str) -> None:
        client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
            API_GROUP, API_VERSION, self.ns, PLURAL, name
        )

    def forge(self, name: str, data: dict[str, str], **metadata: Any) -> None:
        """The tenant creates or overwrites a ConfigMap labelled as a job graph."""
        labels = {STORE_LABEL: "jobgraph", JOB_LABEL: name.removesuffix("-jobgraph")}
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels=labels, **metadata), data=data
        )
        try:
            self.tenant.create_namespaced_config_map(self.ns, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            self.tenant.replace_namespaced_config_map(name, self.ns, body)

    def config_maps(self) -> list[str]:
        items = client.CoreV1Api(self.api).list_namespaced_config_map(self.ns, label_selector=STORE_LABEL)
        return sorted(item.metadata.name for item in items.items)

    def payloads(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=self.bucket)
        return sorted(
            f"s3://{self.bucket}/{o['Key']}" for o in listed.get("Contents", []) if "/ha/" in o["Key"]
        )


@pytest.fixture
def world(
    crd: None,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    s3_server: S3Server,
    bucket: str,
) -> Iterator[World]:
    setup = s3_server.client()
    victim_bucket = f"victim-{uuid.uuid4().hex[:12]}"
    setup.create_bucket(Bucket=victim_bucket)
    setup.put_object(Bucket=victim_bucket, Key=VICTIM_KEY, Body=b"PAR1 another tenant's data")

    operator_s3, victim_requests = s3_server.client(), []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("Bucket") == victim_bucket:
            victim_requests.append(f"{model.name} {params.get('Key', '')}")

    operator_s3.meta.events.register("before-call.s3", record)
    # Every job graph is a payload behind a pointer: the indirection a forged pointer abuses.
    seal = RecordSeal(RecordSeal.new_key())
    stores = configmap_stores(
        api_client,
        S3BlobStore(operator_s3),
        seal,
        results_namespace=namespace,
        namespaces=(namespace,),
        payload_threshold=0,
    )
    ports = Ports(
        jobs=KubeJobs(api_client),
        drivers=KubeDrivers(api_client, seal),
        events=KubeEvents(api_client),
        stores=stores,
        inspector=S3CheckpointInspector(operator_s3),
        storage=S3BlobStore(operator_s3),
        logs=KubeDriverLogs(api_client),
        nodes=NodeWatch(),
    )
    reconciler = Reconciler(ports, lambda: LEADER, DriverSettings(f"{namespace}/ftspark-operator-term"))

    rbac = client.RbacAuthorizationV1Api(api_client)
    verbs = ["get", "list", "create", "update", "patch", "delete"]
    rule = client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=verbs)
    rbac.create_namespaced_role(
        namespace, client.V1Role(metadata=client.V1ObjectMeta(name="tenant"), rules=[rule])
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="tenant"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="tenant"),
            subjects=[
                client.RbacV1Subject(kind="User", name="tenant", api_group="rbac.authorization.k8s.io")
            ],
        ),
    )
    kubeconfig = control_plane.kubeconfig_for("tenant", name=f"tenant-{namespace}")
    tenant = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    yield World(
        namespace, api_client, tenant, bucket, victim_bucket, victim_requests, stores, reconciler, operator_s3
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_a_configmap_posing_as_a_job_graph_gets_no_object_of_anyone_deleted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ftspark")
    forged = {"jobgraph-pointer": world.victim}

    # As an orphan: a job graph record whose job does not exist.
    world.forge("ghost-jobgraph", forged)
    assert world.reconciler.sweeper.forget_orphans() == 1
    assert world.config_maps() == [], "the forged record itself is deleted: it sits at a record's name"
    assert world.victim_exists()
    assert "ghost does not carry this operator's seal" in _warnings(caplog)

    # As the record of a job of that name, found at its first reconcile and again at its deletion.
    world.forge("ghost-jobgraph", forged)
    world.create_job("ghost")
    world.reconcile("ghost")
    assert "UntrustedJobGraph" in event_reasons(world.api, world.ns, "ghost")
    assert pod_names(world.api, world.ns, "ghost") == ["ghost-1-driver"], "the job still runs"
    world.forge("ghost-jobgraph", forged)
    world.delete_job("ghost")
    world.reconcile("ghost")
    assert world.config_maps() == []
    assert world.victim_exists()
    assert world.victim_requests == [], "not even read"


def test_a_live_jobs_edited_pointer_deletes_only_the_operators_own_payloads(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ftspark")
    uid = world.create_job("edited")
    world.reconcile("edited")
    (original,) = world.payloads()
    assert original.startswith(f"s3://{world.bucket}/jobs/edited/ha/jobgraph-{uid}-")

    # The tenant (or its driver, whose ServiceAccount may update ConfigMaps) re-points the record.
    world.forge("edited-jobgraph", {"jobgraph-pointer": world.victim})
    world.reconcile("edited")
    assert "UntrustedJobGraph" in event_reasons(world.api, world.ns, "edited")
    world.delete_job("edited")
    world.reconcile("edited")

    assert world.config_maps() == []
    assert world.victim_exists()
    assert world.victim_requests == []
    assert "edited does not carry this operator's seal" in _warnings(caplog)
    # Left: once the record stopped naming it, nothing names it any more (the operator never lists storage).
    assert world.payloads() == [original]


def test_a_checkpoint_pointer_into_another_bucket_is_never_looked_at(world: World) -> None:
    world.create_job("probe")
    world.reconcile("probe")
    graph = world.stores.job_graphs.get(JobKey(namespace=world.ns, name="probe"))
    assert graph is not None
    own = f"{graph.checkpoint_location}/query-0"
    world.s3.put_object(
        Bucket=world.bucket, Key=f"{own.split('/', 3)[3]}/commits/4", Body=b"v1\n{}"
    )  # batch 4 is complete in the job's own directory
    driver = Epoch("driver", 1, "probe-1-driver")
    key = JobKey(namespace=world.ns, name="probe")
    for checkpoint_id, location in ((0, own), (1, f"s3://{world.victim_bucket}/data")):
        pointer = CheckpointPointer(
            checkpoint_id=checkpoint_id,
            batch_id=4 + checkpoint_id,
            location=location,
            completed_at=graph.submitted_at,
            attempt=1,
        )
        world.stores.checkpoints.add(key, pointer, driver, retained=3)

    set_driver_exited(client.CoreV1Api(world.api), world.ns, "probe-1-driver", 1, "crashed")
    deadline = time.monotonic() + 30
    while "probe-2-driver" not in pod_names(world.api, world.ns, "probe"):
        assert time.monotonic() < deadline, "no second attempt"
        world.reconcile("probe")  # failed → deleted → restart delay (1 s) → attempt 2
        time.sleep(0.3)

    pod = client.CoreV1Api(world.api).read_namespaced_pod("probe-2-driver", world.ns)
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert (env["FTSPARK_RESTORE_FROM"], env["FTSPARK_RESTORE_BATCH"]) == ("latest-checkpoint", "4")
    assert world.victim_requests == [], "no HEAD (nor anything else) to the other tenant's bucket"
    events = client.CoreV1Api(world.api).list_namespaced_event(
        world.ns, field_selector="involvedObject.name=probe,reason=CheckpointSkipped"
    )
    assert [e.message for e in events.items] == [
        "unusable checkpoints [1]: [1] outside the job's checkpoint directory"
    ]


def test_garbage_labelled_as_job_graphs_does_not_stop_the_sweep(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ftspark")
    world.create_job("real")
    world.reconcile("real")
    world.delete_job("real")  # while no leader watched
    world.forge("junk", {"jobgraph": "{"})  # labelled, but at no record's name
    world.forge("fenced-jobgraph", {}, annotations={"ftspark.io/fence-operator": "not a number"})
    world.forge("garbled-jobgraph", {"jobgraph-pointer": "%%%"})
    assert world.config_maps() == [
        "fenced-jobgraph",
        "garbled-jobgraph",
        "junk",
        "real-checkpoints",
        "real-jobgraph",
    ]

    assert world.reconciler.sweeper.forget_orphans() == 2  # real and garbled
    assert world.config_maps() == ["fenced-jobgraph", "junk"]
    assert world.payloads() == [], "the real orphan's payload went with it"
    warnings = _warnings(caplog)
    assert (
        "ConfigMap" in warnings and "/junk labelled" in warnings and "/fenced-jobgraph labelled" in warnings
    )
    assert "garbled does not carry this operator's seal" in warnings


def test_a_forged_result_gets_nothing_deleted_and_ends_no_job(world: World) -> None:
    """Where results live (here the tenant's namespace, as a ConfigMap writer of the operator's would have
    it; on S3, the store's root, which drivers' credentials reach), a forged result names another tenant's
    folder, a live job's uid, or is dirty: the sweeps delete nothing, read nothing of the victim's, and the
    job it names keeps running."""
    live = world.create_job("live")
    world.reconcile("live")
    long_ago = "2020-01-01T00:00:00Z"
    forged = {
        "ghost": {"state": "Succeeded", "clean": True, "data": [f"s3://{world.victim_bucket}/data/"]},
        live: {"state": "Cancelled", "clean": False},
    }
    for uid, fields in forged.items():
        entry = {
            "job": {"namespace": world.ns, "name": "live"},
            "uid": uid,
            "finished_at": long_ago,
            **fields,
        }
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=f"ftspark-result-{uid}", labels={RESULT_LABEL: "true"}),
            data={"result": json.dumps(entry)},
        )
        world.tenant.create_namespaced_config_map(world.ns, body)

    assert world.reconciler.sweeper.finish_dirty_results() == 0
    assert world.reconciler.sweeper.expire_results() == 0
    assert world.victim_exists()
    assert world.victim_requests == [], "not a single request to the victim's bucket"
    assert pod_names(world.api, world.ns, "live") == ["live-1-driver"], "its pods are not deleted"
    set_driver_exited(client.CoreV1Api(world.api), world.ns, "live-1-driver", 1, "crashed")
    deadline = time.monotonic() + 30
    while "live-2-driver" not in pod_names(world.api, world.ns, "live"):
        assert time.monotonic() < deadline, "the forged result ended the job"
        world.reconcile("live")
        time.sleep(0.3)
    assert "UntrustedJobResult" in event_reasons(world.api, world.ns, "live")
