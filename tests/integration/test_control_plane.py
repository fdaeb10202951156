"""The local control plane is a real Kubernetes: versions, CRDs, optimistic concurrency, RBAC, tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest
from ftspark_dev.cluster.processes import REPO_ROOT
from tests.waiting import eventually

CRD_FILE = REPO_ROOT / "crds" / "ftspark.io_faulttolerantsparkjobs.yaml"


def test_reports_the_pinned_kubernetes_version(control_plane: ControlPlane) -> None:
    versions = json.loads(control_plane.kubectl("version", "--output=json").stdout)
    assert versions["serverVersion"]["gitVersion"] == "v1.34.12"
    assert versions["clientVersion"]["gitVersion"] == "v1.34.12"


@pytest.fixture(scope="module")
def installed_crd(control_plane: ControlPlane, api_client: client.ApiClient) -> str:
    control_plane.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    extensions = client.ApiextensionsV1Api(api_client)
    name = f"{PLURAL}.{API_GROUP}"

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established, timeout=30, what="CRD established")
    return name


def test_crd_is_structural_and_established(installed_crd: str, api_client: client.ApiClient) -> None:
    crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(installed_crd)
    conditions = {c.type: c for c in crd.status.conditions}
    assert conditions["Established"].status == "True"
    assert "NonStructuralSchema" not in conditions
    assert crd.status.accepted_names.short_names == ["ftsj"]


def test_kubectl_get_shows_the_printer_columns(
    control_plane: ControlPlane, installed_crd: str, api_client: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("shown", "bucket")
    )
    since = "2026-01-01T00:00:00Z"
    ready = {"type": "Ready", "status": "True", "reason": "Running", "lastTransitionTime": since}
    status: dict[str, Any] = {
        "phase": "Running",
        "attempt": 3,
        "latestCheckpoint": {"id": 42, "batchId": 40, "time": since, "location": "s3://b/c"},
        "conditions": [ready, {**ready, "status": "False"}],
        "savepoints": [
            {"id": f"sp-{n}-a3", "time": since, "location": f"s3://b/savepoints/sp-{n}-a3", "batchId": n}
            for n in (1, 2)
        ],
        "lastFailure": {"attempt": 2, "time": since, "reason": "DriverKilled", "message": "exit 137"},
    }
    with pytest.raises(ApiException) as twice:  # conditions are a map keyed by type
        objects.patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace, PLURAL, "shown", {"status": status}
        )
    assert twice.value.status == 422
    status["conditions"] = status["conditions"][:1]
    objects.patch_namespaced_custom_object_status(
        API_GROUP, API_VERSION, namespace, PLURAL, "shown", {"status": status}
    )
    header, row = control_plane.kubectl("get", "ftsj", "-n", namespace).stdout.splitlines()
    assert header.split() == ["NAME", "PHASE", "ATTEMPT", "CHECKPOINT", "CHECKPOINTED", "AGE"]
    name, phase, attempt, checkpoint, checkpointed, _ = row.split()
    assert [name, phase, attempt, checkpoint] == ["shown", "Running", "3", "42"]
    assert checkpointed.endswith("d"), f"the checkpoint's age, in days since {since}: {checkpointed}"
    wide_header, wide_row = control_plane.kubectl(
        "get", "ftsj", "-n", namespace, "-o", "wide"
    ).stdout.splitlines()
    assert wide_header.split() == [
        "NAME", "PHASE", "ATTEMPT", "CHECKPOINT", "CHECKPOINTED", "BATCH", "SAVEPOINT", "FAILURE", "AGE"
    ]  # fmt: skip
    columns = wide_row.split()
    assert columns[:4] + columns[5:8] == ["shown", "Running", "3", "42", "40", "sp-2-a3", "DriverKilled"]


def test_kubectl_explain_shows_field_descriptions(control_plane: ControlPlane, installed_crd: str) -> None:
    def explained() -> str:
        result = control_plane.kubectl("explain", "ftsj.spec.checkpoint", check=False)
        return result.stdout if result.returncode == 0 else ""

    text = eventually(explained, timeout=30, what="kubectl explain (OpenAPI published)")
    assert "s3:// prefix under which the job keeps checkpoints" in text
    assert "retained" in text
    assert "Completed checkpoints whose pointers are kept" in text


def test_schema_defaults_and_rejects_bad_fields(
    installed_crd: str, api_client: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api_client)
    created = objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("good", "bucket")
    )
    assert created["spec"]["upgradeMode"] == "last-state"
    assert created["spec"]["restartStrategy"]["exponentialDelay"]["backoffMultiplier"] == 2.0
    assert created["spec"]["checkpoint"]["retained"] == 3

    with pytest.raises(ApiException) as bad_storage:
        objects.create_namespaced_custom_object(
            API_GROUP,
            API_VERSION,
            namespace,
            PLURAL,
            job_manifest("bad-storage", "bucket", checkpoint={"storage": "/tmp/x"}),
        )
    assert bad_storage.value.status == 422
    assert "spec.checkpoint.storage" in json.loads(bad_storage.value.body)["message"]

    with pytest.raises(ApiException) as bad_backoff:
        objects.create_namespaced_custom_object(
            API_GROUP,
            API_VERSION,
            namespace,
            PLURAL,
            job_manifest(
                "bad-backoff",
                "bucket",
                restartStrategy={"exponentialDelay": {"initialBackoffSeconds": 60, "maxBackoffSeconds": 5}},
            ),
        )
    assert bad_backoff.value.status == 422
    assert (
        "maxBackoffSeconds must be >= initialBackoffSeconds" in json.loads(bad_backoff.value.body)["message"]
    )

    # The name becomes Service and Spark pod names: refused at once, not by a pod create much later.
    for bad_name in ("a" * 41, "job.v2", "2jobs"):
        with pytest.raises(ApiException) as bad:
            objects.create_namespaced_custom_object(
                API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(bad_name, "bucket")
            )
        assert bad.value.status == 422, bad_name
        assert "metadata.name: at most 40 characters" in json.loads(bad.value.body)["message"]
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("a" * 40, "bucket")
    )


def test_lease_update_with_stale_resource_version_conflicts(
    api_client: client.ApiClient, namespace: str
) -> None:
    leases = client.CoordinationV1Api(api_client)
    lease = leases.create_namespaced_lease(
        namespace,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="lock"), spec=client.V1LeaseSpec(holder_identity="a")
        ),
    )
    stale_version = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    updated = leases.replace_namespaced_lease("lock", namespace, lease)
    assert updated.metadata.resource_version != stale_version

    lease.spec.holder_identity = "c"
    lease.metadata.resource_version = stale_version
    with pytest.raises(ApiException) as conflict:
        leases.replace_namespaced_lease("lock", namespace, lease)
    assert conflict.value.status == 409
    assert leases.read_namespaced_lease("lock", namespace).spec.holder_identity == "b"


def _token_client(control_plane: ControlPlane, token: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = control_plane.server
    configuration.ssl_ca_cert = str(control_plane.ca_path)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


def test_service_account_with_narrow_role_is_denied_the_rest(
    control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="narrow"))
    )
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="read-configmaps"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["get", "list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="narrow-reads-configmaps"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="read-configmaps"
            ),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="narrow", namespace=namespace)],
        ),
    )
    # A real signed token from the TokenRequest API: the API server authenticates it with its own key.
    token = core.create_namespaced_service_account_token(
        "narrow", namespace, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    ).status.token
    narrow = client.CoreV1Api(_token_client(control_plane, token))

    assert narrow.list_namespaced_config_map(namespace).items is not None
    with pytest.raises(ApiException) as create_denied:
        narrow.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"))
        )
    assert create_denied.value.status == 403
    assert f"system:serviceaccount:{namespace}:narrow" in create_denied.value.body
    with pytest.raises(ApiException) as secrets_denied:
        narrow.list_namespaced_secret(namespace)
    assert secrets_denied.value.status == 403
    with pytest.raises(ApiException) as other_namespace_denied:
        narrow.list_namespaced_config_map("default")
    assert other_namespace_denied.value.status == 403

    with pytest.raises(ApiException) as forged:
        client.CoreV1Api(_token_client(control_plane, token[:-4] + "AAAA")).list_namespaced_config_map(
            namespace
        )
    assert forged.value.status == 401
