"""The job policy on a real API server. A tenant who may create FaultTolerantSparkJobs and nothing more is
refused each hostile field at apply time by the chart's ValidatingAdmissionPolicy, the field named, unless the
namespace or the installation grants its allowance; the API server and ftspark.domain.policy give the same
verdict on every case of tests/unit/test_policy.py. Without the admission policy, the operator refuses the
same specs before it creates anything. A job's storage outside the allowed prefixes is refused at apply time
in the operator's words."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.domain.models import JobSpec
from ftspark.domain.policy import (
    ALLOWANCES,
    NAMESPACE_LABEL_PREFIX,
    STORAGE_PREFIXES_ANNOTATION,
    outside_storage,
    storage_prefixes,
    violations,
)
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    event_reasons,
    invalid_spec,
    job_manifest,
    job_status,
    pod_names,
)
from tests.helm.conftest import CHART, KUBE_VERSION, helm_binary, run_helm
from tests.unit.test_policy import HARMLESS, HOSTILE
from tests.waiting import eventually

INSTALLATION_ALLOWS = "nodeName"  # what the chart's jobPolicy.allow grants in every namespace here
INSTALLATION_STORAGE = "s3://bucket/jobs"  # the chart's jobPolicy.storagePrefixes: where job_manifest's are
ALL_ALLOWED = {f"{NAMESPACE_LABEL_PREFIX}{allowance}": "true" for allowance in ALLOWANCES}
TENANT_RULES = [
    client.V1PolicyRule(
        api_groups=[API_GROUP], resources=[PLURAL], verbs=["get", "list", "create", "update", "delete"]
    )
]


def _namespace(core: client.CoreV1Api, labels: dict[str, str]) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    return name


@pytest.fixture
def tenancy(
    crd: None, control_plane: ControlPlane, api_client: client.ApiClient
) -> Iterator[tuple[client.ApiClient, str, str]]:
    """(the tenant's client, a namespace that grants nothing, one that grants every allowance), under the
    chart's admission policy bound to those two namespaces (jobs' storage bounded to INSTALLATION_STORAGE)."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    plain, allowing = _namespace(core, {}), _namespace(core, ALL_ALLOWED)
    tenant = f"tenant-{plain}"
    for namespace in (plain, allowing):
        meta = client.V1ObjectMeta(name="jobs-author")
        rbac.create_namespaced_role(namespace, client.V1Role(metadata=meta, rules=TENANT_RULES))
        subject = client.RbacV1Subject(api_group="rbac.authorization.k8s.io", kind="User", name=tenant)
        role = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="jobs-author")
        rbac.create_namespaced_role_binding(
            namespace, client.V1RoleBinding(metadata=meta, role_ref=role, subjects=[subject])
        )
    rendered = run_helm(
        helm_binary(),
        "template",
        "ftspark-operator",
        str(CHART),
        f"--namespace=op-{plain}",  # the policy's name: unique per test
        f"--kube-version={KUBE_VERSION}",
        "--show-only=templates/job-policy.yaml",
        f"--set=jobPolicy.allow={{{INSTALLATION_ALLOWS}}}",
        f"--set=jobPolicy.storagePrefixes={{{INSTALLATION_STORAGE}}}",
        f"--set=watchNamespaces={{{plain},{allowing}}}",
    )
    assert rendered.returncode == 0, rendered.stderr
    control_plane.kubectl("apply", "-f", "-", stdin=rendered.stdout)
    # The API server loads a new policy asynchronously: wait until it refuses what it must.
    objects = client.CustomObjectsApi(api_client)
    probe = job_manifest("probe", "bucket", driver={"podTemplate": {"spec": {"hostPID": True}}})

    def enforced() -> bool:
        try:
            objects.create_namespaced_custom_object(API_GROUP, API_VERSION, plain, PLURAL, probe)
        except client.ApiException as error:
            return bool(error.status == 403)
        objects.delete_namespaced_custom_object(API_GROUP, API_VERSION, plain, PLURAL, "probe")
        return False

    eventually(enforced, timeout=30, what="the admission policy in force")
    yield (
        config.new_client_from_config(config_file=str(control_plane.kubeconfig_for(tenant))),
        plain,
        allowing,
    )
    control_plane.kubectl("delete", "-f", "-", stdin=rendered.stdout)
    for namespace in (plain, allowing):
        core.delete_namespace(namespace)


def _apply(api: client.ApiClient, namespace: str, name: str, fields: dict[str, Any]) -> str | None:
    """Create the job and delete it again: None if admitted, else the API server's message."""
    objects = client.CustomObjectsApi(api)
    try:
        objects.create_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, "bucket", **fields)
        )
    except client.ApiException as error:
        assert error.status == 403, error.body
        return str(json.loads(error.body)["message"])
    objects.delete_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, name)
    return None


def _spec(fields: dict[str, Any]) -> JobSpec:
    return JobSpec.model_validate(job_manifest("x", "bucket", **fields)["spec"])


def test_admission_refuses_what_the_policy_refuses_naming_the_field_unless_allowed(
    tenancy: tuple[client.ApiClient, str, str],
) -> None:
    tenant, plain, allowing = tenancy
    disagreements: list[str] = []
    started, calls = time.monotonic(), 0
    for index, (fields, _, allowance) in enumerate([*HOSTILE, *((h, "", None) for h in HARMLESS)]):
        for namespace, granted in ((plain, {INSTALLATION_ALLOWS}), (allowing, set(ALLOWANCES))):
            expected = violations(_spec(fields), granted)
            refused = _apply(tenant, namespace, f"case-{index}", fields)
            calls += 1
            # The API server names a list element [*] and a map key as the operator does.
            named = [re.sub(r"\[\d+\]", "[*]", v.field) + ": " for v in expected]
            if bool(refused) != bool(expected) or (refused and not any(n in refused for n in named)):
                disagreements.append(
                    f"{namespace} {fields} ({allowance}): policy {named}, API server {refused}"
                )
    print(f"\n{calls} creates through the admission policy in {time.monotonic() - started:.2f} s")
    assert disagreements == []


def test_hostile_specs_are_refused_at_apply_time_with_the_field_named(
    tenancy: tuple[client.ApiClient, str, str],
) -> None:
    tenant, plain, allowing = tenancy
    cases: dict[str, dict[str, Any]] = {
        "spec.driver.podTemplate.spec.serviceAccountName": {
            "driver": {"podTemplate": {"spec": {"serviceAccountName": "admin"}}}
        },
        "spec.executor.podTemplate.spec.hostPID": {"executor": {"podTemplate": {"spec": {"hostPID": True}}}},
        "spec.driver.podTemplate.spec.hostNetwork": {
            "driver": {"podTemplate": {"spec": {"hostNetwork": True}}}
        },
        "spec.driver.podTemplate.spec.containers[*].securityContext.privileged": {
            "driver": {
                "podTemplate": {
                    "spec": {"containers": [{"name": "driver", "securityContext": {"privileged": True}}]}
                }
            }
        },
        'spec.executor.podTemplate.metadata.labels["ftspark.io/attempt"]': {
            "executor": {"podTemplate": {"metadata": {"labels": {"ftspark.io/attempt": "x"}}}}
        },
        "spec.executor.podTemplate.spec.volumes[*].hostPath": {
            "executor": {
                "podTemplate": {
                    "spec": {"volumes": [{"name": "k", "hostPath": {"path": "/var/lib/kubelet"}}]}
                }
            }
        },
        'spec.sparkConf["spark.kubernetes.authenticate.executor.serviceAccountName"]': {
            "sparkConf": {"spark.kubernetes.authenticate.executor.serviceAccountName": "admin"}
        },
        'spec.sparkConf["spark.kubernetes.executor.volumes.hostPath.root.mount.path"]': {
            "sparkConf": {"spark.kubernetes.executor.volumes.hostPath.root.mount.path": "/host"}
        },
    }
    for field, fields in cases.items():
        refused = _apply(tenant, plain, "hostile", fields)
        assert refused is not None and f"{field}: " in refused, (field, refused)
        print(f"\n{refused}")
        if "ftspark.io/" not in field:
            assert _apply(tenant, allowing, "hostile", fields) is None, field
    nodename = {"driver": {"podTemplate": {"spec": {"nodeName": "n1"}}}}
    assert _apply(tenant, plain, "nodename", nodename) is None, "granted to the installation"


def test_storage_outside_the_allowed_prefixes_is_refused_at_apply_time_as_the_operator_refuses_it(
    tenancy: tuple[client.ApiClient, str, str], api_client: client.ApiClient
) -> None:
    """Where a job keeps its state: under the chart's storagePrefixes, or in a namespace annotated with its
    own, under those too; the API server refuses the rest with the operator's own words (outside_storage)."""
    tenant, plain, annotated = tenancy
    granted = "s3a://team-a/x/, s3://shared"  # an admin's spelling: s3a://, a trailing slash, spaces
    annotations = {STORAGE_PREFIXES_ANNOTATION: granted}
    client.CoreV1Api(api_client).patch_namespace(annotated, {"metadata": {"annotations": annotations}})
    shared = {"checkpoint": {"storage": "s3://shared/j"}}
    eventually(lambda: _apply(tenant, annotated, "seen", shared) is None, timeout=30, what="the annotation")
    storages = [
        "s3://bucket/jobs",
        "s3a://bucket/jobs/a/",
        "s3://bucket/jobs-x/a",  # a prefix ends at a path segment
        "s3://bucket/job",
        "s3://other/jobs/a",
        "s3://team-a/x/y",
        "s3://team-a/xy",
        "s3a://shared/",
        "s3://shared-b/a",
    ]
    started, disagreements, refusals = time.monotonic(), [], {plain: 0, annotated: 0}
    for namespace, prefixes in ((plain, ()), (annotated, storage_prefixes(annotations))):
        for index, storage in enumerate(storages):
            fields = {"checkpoint": {"storage": storage}}
            expected = outside_storage(_spec(fields), (INSTALLATION_STORAGE, *prefixes))
            refused = _apply(tenant, namespace, f"stored-{index}", fields)
            if bool(refused) != bool(expected) or (refused and expected not in refused):
                disagreements.append(f"{namespace} {storage}: operator {expected!r}, API server {refused!r}")
            refusals[namespace] += bool(refused)
    print(f"\n{2 * len(storages)} creates in {time.monotonic() - started:.2f} s; e.g. {refused}")
    assert disagreements == []
    assert refusals == {plain: 7, annotated: 5}, "the annotation grants team-a/x and shared, there only"
    # A way back out of a prefix is not even a storage: the CRD's schema refuses it before any policy.
    dotted = job_manifest("dotted", "bucket", checkpoint={"storage": f"{INSTALLATION_STORAGE}/../other"})
    with pytest.raises(client.ApiException) as invalid:
        client.CustomObjectsApi(tenant).create_namespaced_custom_object(
            API_GROUP, API_VERSION, plain, PLURAL, dotted
        )
    assert invalid.value.status == 422 and "spec.checkpoint.storage" in str(invalid.value.body)


PLAIN_SECRET = "wJalrXUtnFEMI-not-a-real-key"


def test_without_admission_the_operator_refuses_before_creating_anything(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "netjob": (
            "spec.driver.podTemplate.spec.hostNetwork",
            {"driver": {"podTemplate": {"spec": {"hostNetwork": True}}}},
        ),
        "kubelet": (
            "spec.executor.podTemplate.spec.volumes[0].hostPath",
            {
                "executor": {
                    "podTemplate": {
                        "spec": {"volumes": [{"name": "k", "hostPath": {"path": "/var/lib/kubelet"}}]}
                    }
                }
            },
        ),
        "adopted": (
            'spec.driver.podTemplate.metadata.labels["ftspark.io/job"]',
            {"driver": {"podTemplate": {"metadata": {"labels": {"ftspark.io/job": "other"}}}}},
        ),
        "someone": (
            'spec.sparkConf["spark.kubernetes.authenticate.executor.serviceAccountName"]',
            {"sparkConf": {"spark.kubernetes.authenticate.executor.serviceAccountName": "admin"}},
        ),
        "leaky": (
            'spec.sparkConf["spark.hadoop.fs.s3a.secret.key"]',
            {"sparkConf": {"spark.hadoop.fs.s3a.secret.key": PLAIN_SECRET}},
        ),
    }
    fleet.start()
    for name, (_, fields) in cases.items():
        objects.create_namespaced_custom_object(
            API_GROUP, API_VERSION, ns, PLURAL, job_manifest(name, bucket, **fields)
        )
    for name, (field, _) in cases.items():
        ready = eventually(
            partial(invalid_spec, api_client, ns, name),
            timeout=30,
            what=lambda: f"InvalidSpec\n{fleet.logs()}",
        )
        assert ready["message"].startswith(f"{field}: "), ready["message"]
        assert event_reasons(api_client, ns, name) == ["InvalidSpec"]
    time.sleep(2)
    for name in cases:
        assert pod_names(api_client, ns, name) == []
    config_maps = [c.metadata.name for c in core.list_namespaced_config_map(ns).items]
    assert not [c for c in config_maps if c.startswith(tuple(f"{name}-" for name in cases))], (
        "no job graph, no executor template"
    )
    # The refused secret is in the resource its author wrote, and nowhere the operator writes or says.
    written = [
        *(str(c.data) for c in core.list_namespaced_config_map(ns).items),
        *(str(e.message) for e in core.list_namespaced_event(ns).items),
        str(job_status(api_client, ns, "leaky")),
        fleet.logs(),
    ]
    assert not [text for text in written if PLAIN_SECRET in text]

    # An admin grants hostNetwork to the namespace; the job runs at its next reconcile (a spec change here).
    core.patch_namespace(ns, {"metadata": {"labels": {f"{NAMESPACE_LABEL_PREFIX}hostNetwork": "true"}}})
    objects.patch_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "netjob", {"spec": {"arguments": ["again"]}}
    )
    eventually(
        lambda: pod_names(api_client, ns, "netjob") == ["netjob-1-driver"],
        timeout=30,
        what="granted job runs",
    )
    assert core.read_namespaced_pod("netjob-1-driver", ns).spec.host_network is True
