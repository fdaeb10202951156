"""`helm install` onto the local control plane: the operator, running with the chart's own ServiceAccount and
RBAC (namespaced mode), does its job and is denied the rest."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.domain.models import JobSpec
from ftspark.domain.policy import NAMESPACE_LABEL_PREFIX
from ftspark.manifests import (
    DRIVER_RULES,
    AttemptPlan,
    driver_pod,
    executor_admission_probe,
    local_recovery_node_dir,
    local_state_volume,
)
from ftspark.protocol import DRIVER_SERVICE_ACCOUNT, JOB_LABEL, record_key_name, term_floor_name
from ftspark.reconcile.nodes import NODE_LEASE_NAMESPACE
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import OperatorFleet, job_manifest, pod_names
from ftspark_dev.cluster.s3server import S3Server
from tests.helm.conftest import CHART, run_helm
from tests.waiting import eventually


@pytest.fixture
def installed(
    helm: Path, control_plane: ControlPlane, api_client: client.ApiClient
) -> Iterator[tuple[str, str]]:
    """(operator namespace, jobs namespace) of a fresh namespaced-mode install."""
    operator_ns, jobs_ns = f"op-{uuid.uuid4().hex[:8]}", f"jobs-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=jobs_ns)))
    result = run_helm(
        helm,
        "install",
        "ftspark-operator",
        str(CHART),
        f"--kubeconfig={control_plane.kubeconfig}",
        f"--namespace={operator_ns}",
        "--create-namespace",
        "--set=rbac.clusterWide=false",
        f"--set=watchNamespaces={{{jobs_ns}}}",
        "--set=localRecovery.enabled=true",
    )
    assert result.returncode == 0, result.stderr
    yield operator_ns, jobs_ns
    run_helm(
        helm,
        "uninstall",
        "ftspark-operator",
        f"--kubeconfig={control_plane.kubeconfig}",
        f"--namespace={operator_ns}",
    )
    for name in (operator_ns, jobs_ns):
        core.delete_namespace(name)


def test_chart_service_account_runs_the_operator_and_nothing_more(
    installed: tuple[str, str],
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    s3_server: S3Server,
    tmp_path: Path,
) -> None:
    operator_ns, jobs_ns = installed
    core = client.CoreV1Api(api_client)
    deployment = client.AppsV1Api(api_client).read_namespaced_deployment("ftspark-operator", operator_ns)
    assert deployment.spec.template.spec.service_account_name == "ftspark-operator"
    as_operator = control_plane.kubeconfig_for_service_account(operator_ns, "ftspark-operator")

    bucket = f"helm-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=bucket)
    fleet = OperatorFleet(control_plane, s3_server, operator_ns, jobs_ns, tmp_path, kubeconfig=as_operator)
    fleet.start()
    try:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            API_GROUP, API_VERSION, jobs_ns, PLURAL, job_manifest("charted", bucket)
        )

        def phase() -> object:
            body = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
                API_GROUP, API_VERSION, jobs_ns, PLURAL, "charted"
            )
            return body.get("status", {}).get("phase")

        # The pod is created before the status is recorded (act, then record): wait for both.
        eventually(
            lambda: pod_names(api_client, jobs_ns, "charted") == ["charted-1-driver"]
            and phase() == "Submitting",
            timeout=30,
            what=lambda: f"the operator works with the chart's rights\n{fleet.logs()}",
        )
        # With the chart's rights the operator lets the drivers read its term floor, and nothing else there.
        as_driver = control_plane.kubeconfig_for_service_account(jobs_ns, DRIVER_SERVICE_ACCOUNT)
        driver_core = client.CoreV1Api(config.new_client_from_config(config_file=str(as_driver)))
        floor = driver_core.read_namespaced_config_map(term_floor_name("ftspark-operator"), operator_ns)
        assert floor.data["term"].isdigit()
        with pytest.raises(client.ApiException) as refused_list:
            driver_core.list_namespaced_config_map(operator_ns)
        assert refused_list.value.status == 403
        # The chart's admission policy refuses a hostile job at apply time; once the namespace allows it, the
        # operator reads that label with the chart's rights and runs the job.
        hostile = job_manifest("hosted", bucket, driver={"podTemplate": {"spec": {"hostNetwork": True}}})
        with pytest.raises(client.ApiException) as refused:
            client.CustomObjectsApi(api_client).create_namespaced_custom_object(
                API_GROUP, API_VERSION, jobs_ns, PLURAL, hostile
            )
        assert refused.value.status == 403
        assert "spec.driver.podTemplate.spec.hostNetwork" in str(refused.value.body)
        labels = {"metadata": {"labels": {f"{NAMESPACE_LABEL_PREFIX}hostNetwork": "true"}}}
        core.patch_namespace(jobs_ns, labels)
        eventually(
            partial(_admitted, api_client, jobs_ns, hostile),
            timeout=30,
            what="the namespace's allowance in force",
        )
        eventually(
            lambda: pod_names(api_client, jobs_ns, "hosted") == ["hosted-1-driver"],
            timeout=30,
            what=lambda: f"the allowed job runs\n{fleet.logs()}",
        )
        # Its watches (the node Leases' among them, in kube-node-lease) work with the chart's rights.
        assert "cannot watch" not in fleet.logs(), fleet.logs()
    finally:
        fleet.stop_all()

    # The one Secret it reads: the key its job graphs and results are sealed with, which it made itself.
    key = core.read_namespaced_secret(record_key_name("ftspark-operator"), operator_ns)
    assert key.immutable and key.metadata.labels == {"app.kubernetes.io/managed-by": "ftspark"}
    operator = config.new_client_from_config(config_file=str(as_operator))
    denied: list[Callable[[], object]] = [
        partial(client.CoreV1Api(operator).list_namespaced_secret, jobs_ns),
        partial(client.CoreV1Api(operator).list_namespaced_secret, operator_ns),
        partial(client.CoreV1Api(operator).read_namespaced_secret, "charted-1-driver-rpc", jobs_ns),
        partial(client.CoreV1Api(operator).delete_collection_namespaced_pod, jobs_ns),
        # Nodes and their Leases it lists and watches (a drain coming, a node falling silent), never changes.
        partial(client.CoreV1Api(operator).patch_node, "any", {"spec": {"unschedulable": True}}),
        partial(
            client.CoordinationV1Api(operator).patch_namespaced_lease,
            "any",
            NODE_LEASE_NAMESPACE,
            {"spec": {"holderIdentity": "x"}},
        ),
        partial(client.CoreV1Api(operator).list_namespaced_pod, "default"),
        partial(
            client.CustomObjectsApi(operator).patch_namespaced_custom_object,
            API_GROUP,
            API_VERSION,
            jobs_ns,
            PLURAL,
            "charted",
            {"spec": {"arguments": ["x"]}},
        ),
    ]
    for attempt in denied:
        with pytest.raises(client.ApiException) as refused:
            attempt()
        assert refused.value.status == 403


def test_the_operators_token_writes_only_objects_labelled_as_its_own(
    installed: tuple[str, str], control_plane: ControlPlane, api_client: client.ApiClient
) -> None:
    """The chart's admission policies, beyond RBAC: a leaked operator token cannot create, take over (by
    labelling) or delete a tenant's objects in the namespaces it manages, nor write in kube-system, nor grant
    more than the drivers' rights, nor create a labelled pod holding more than the operator's own pods do."""
    operator_ns, jobs_ns = installed
    core = client.CoreV1Api(api_client)
    as_operator = client.CoreV1Api(
        config.new_client_from_config(
            config_file=str(control_plane.kubeconfig_for_service_account(operator_ns, "ftspark-operator"))
        )
    )

    def config_map(name: str, labels: dict[str, str] | None = None) -> client.V1ConfigMap:
        return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data={"k": "v"})

    def refused(call: Callable[[], object]) -> str:
        with pytest.raises(client.ApiException) as error:
            call()
        assert error.value.status == 403, error.value.body
        return str(error.value.body)

    def unlabelled_refused() -> bool:
        try:
            as_operator.create_namespaced_config_map(jobs_ns, config_map("forged"))
        except client.ApiException as error:
            return error.status == 403 and "labelled as its own" in str(error.body)
        core.delete_namespaced_config_map("forged", jobs_ns)  # admitted: the policy is not loaded yet
        return False

    # The policy takes effect once the API server has loaded it (a second or so after the install).
    eventually(unlabelled_refused, timeout=20, what="the admission policy in force")
    as_operator.create_namespaced_config_map(jobs_ns, config_map("ours", {JOB_LABEL: "charted"}))
    as_operator.delete_namespaced_config_map("ours", jobs_ns)

    core.create_namespaced_config_map(jobs_ns, config_map("tenant-data"))
    takeover = core.read_namespaced_config_map("tenant-data", jobs_ns)
    takeover.metadata.labels = {JOB_LABEL: "charted"}  # an update its RBAC allows; the policy does not
    assert "labelled as its own" in refused(
        partial(as_operator.replace_namespaced_config_map, "tenant-data", jobs_ns, takeover)
    )
    assert "labelled as its own" in refused(
        partial(as_operator.delete_namespaced_config_map, "tenant-data", jobs_ns)
    )
    assert core.read_namespaced_config_map("tenant-data", jobs_ns).metadata.labels is None
    refused(
        partial(as_operator.create_namespaced_config_map, "kube-system", config_map("x", {JOB_LABEL: "x"}))
    )
    # Leases: a node's heartbeat (kube-node-lease) is not its own to renew, whatever RBAC says.
    leases = client.CoordinationV1Api(as_operator.api_client)
    node_lease = client.V1Lease(metadata=client.V1ObjectMeta(name="node-x"), spec=client.V1LeaseSpec())
    assert "labelled as its own" in refused(partial(leases.create_namespaced_lease, jobs_ns, node_lease))
    # Labelled as its own, yet not what it grants: the drivers' Role bound to someone else, a wider Role.
    rbac = client.RbacAuthorizationV1Api(as_operator.api_client)
    labelled = client.V1ObjectMeta(name="ftspark-driver", labels={"app.kubernetes.io/managed-by": "ftspark"})
    as_it_does = client.V1Role(metadata=labelled, rules=list(DRIVER_RULES))
    rbac.create_namespaced_role(jobs_ns, as_it_does)
    to_anyone = client.V1RoleBinding(
        metadata=labelled,
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="ftspark-driver"),
        subjects=[client.RbacV1Subject(kind="User", name="mallory", api_group="rbac.authorization.k8s.io")],
    )
    assert "binds only the drivers' Roles" in refused(
        partial(rbac.create_namespaced_role_binding, jobs_ns, to_anyone)
    )
    # Rights the operator holds (so RBAC lets it grant them) but a driver has not: every job's HA records.
    records = client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["list", "delete"])
    wider = client.V1Role(
        metadata=client.V1ObjectMeta(name="wider", labels=labelled.labels), rules=[*DRIVER_RULES, records]
    )
    assert "the drivers' rights and no more" in refused(partial(rbac.create_namespaced_role, jobs_ns, wider))

    _only_pods_like_its_own(as_operator, jobs_ns)
    _only_volumes_like_its_own(as_operator, jobs_ns)


def _only_pods_like_its_own(as_operator: client.CoreV1Api, namespace: str) -> None:
    """With the operator's token, a labelled pod is admitted only as the operator makes its own."""
    # Labelled as its own, yet not the pods it makes: another ServiceAccount, the node's processes, its root.
    # Dry runs (admission runs for them all the same): nothing starts, whatever is admitted.
    plan = _local_recovery_plan(namespace)
    create_pod = partial(as_operator.create_namespaced_pod, namespace, dry_run="All")

    def hostile(**spec: object) -> dict[str, Any]:
        pod = driver_pod(plan)
        pod["spec"].update(spec)
        return pod

    def another_account_refused() -> bool:
        try:
            create_pod(hostile(serviceAccountName="default"))
        except client.ApiException as error:
            return error.status == 403 and "ftspark-driver ServiceAccount" in str(error.body)
        return False  # admitted: the policy is not loaded yet

    root = {"name": "root", "hostPath": {"path": "/"}}
    eventually(another_account_refused, timeout=20, what="the operator's pod policy in force")
    own_dir = {"name": "own", "hostPath": {"path": local_recovery_node_dir(plan)}}
    for spec, rule in (
        ({"hostPID": True}, "node's namespaces"),
        ({"volumes": [*driver_pod(plan)["spec"]["volumes"], root]}, "no directory of the node"),
        # Not even its job's own: localRecovery reaches it through a claim.
        ({"volumes": [*driver_pod(plan)["spec"]["volumes"], own_dir]}, "no directory of the node"),
    ):
        with pytest.raises(client.ApiException) as error:
            create_pod(hostile(**spec))
        assert error.value.status == 403 and rule in str(error.value.body), error.value.body
    # What it makes: the driver pod, and localRecovery's executor probe (its directory through the claim).
    create_pod(driver_pod(plan))
    create_pod(executor_admission_probe(plan))


def _only_volumes_like_its_own(as_operator: client.CoreV1Api, namespace: str) -> None:
    """With the operator's token (which may create PersistentVolumes, cluster-scoped), only localRecovery's
    volume of a job: its node directory, bound to a claim in its namespace. Dry runs: nothing is made."""
    plan = _local_recovery_plan(namespace)
    create = partial(as_operator.create_persistent_volume, dry_run="All")

    def hostile(path: str = "", claim_namespace: str = namespace, **spec: object) -> dict[str, Any]:
        volume = local_state_volume(plan)
        volume["spec"].update(spec)
        volume["spec"]["claimRef"]["namespace"] = claim_namespace
        if path:
            volume["spec"]["hostPath"]["path"] = path
        return volume

    other_uid = str(uuid.uuid4())
    for volume in (
        hostile(path="/"),  # the node's root
        hostile(path="/etc/kubernetes"),
        hostile(path=local_recovery_node_dir(plan).replace(plan.job_uid, other_uid)),  # another job's
        hostile(path=local_recovery_node_dir(plan).replace(f"/{namespace}/", "/tenant-b/")),
        hostile(claim_namespace="tenant-b"),  # its directory, for a claim of another namespace
        hostile(hostPath={"path": local_recovery_node_dir(plan), "type": "Socket"}),
    ):
        with pytest.raises(client.ApiException) as error:
            create(volume)
        body = str(error.value.body)
        assert error.value.status == 403 and "only localRecovery's volumes" in body, body
    unlabelled = local_state_volume(plan)
    unlabelled["metadata"]["labels"] = {}
    with pytest.raises(client.ApiException) as error:
        create(unlabelled)
    assert error.value.status == 403 and "labelled as its own" in str(error.value.body)
    create(local_state_volume(plan))


def _local_recovery_plan(namespace: str) -> AttemptPlan:
    """An attempt of a job with localRecovery, as the operator plans it."""
    spec = JobSpec.model_validate(
        {
            "image": "spark:test",
            "mainApplicationFile": "local:///job.py",
            "checkpoint": {"storage": "s3://bkt/j"},
            "localRecovery": {"enabled": True},
        }
    )
    uid = str(uuid.uuid4())
    return AttemptPlan(namespace, "charted", uid, 1, spec, "s3://bkt/j/checkpoints/x", "latest-checkpoint")


def _admitted(api: client.ApiClient, namespace: str, body: dict[str, object]) -> bool:
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, body
        )
    except client.ApiException as error:
        if error.status == 403:  # the API server has not seen the label yet
            return False
        raise
    return True


def test_a_drivers_token_creates_only_its_own_executors_and_writes_only_its_jobs_records(
    installed: tuple[str, str], control_plane: ControlPlane, api_client: client.ApiClient
) -> None:
    """The chart's policy on the drivers' ServiceAccount, beyond its Role (pods create, ConfigMaps and Leases
    update): in a privileged namespace (Pod Security refuses nothing there), a job's code holding its driver's
    token gets no privileged pod, no node directory, no other job's record or Lease; its executors pass."""
    _, jobs_ns = installed
    core = client.CoreV1Api(api_client)
    core.patch_namespace(
        jobs_ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    )
    driver = _driver_of_counts(core, client.RbacAuthorizationV1Api(api_client), jobs_ns)
    for name in ("counts-checkpoints", "other-checkpoints"):
        core.create_namespaced_config_map(
            jobs_ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name))
        )
    as_driver = config.new_client_from_config(
        config_file=str(
            control_plane.kubeconfig_for_service_account(
                jobs_ns, DRIVER_SERVICE_ACCOUNT, pod="counts-1-driver"
            )
        )
    )
    driver_core, driver_leases = client.CoreV1Api(as_driver), client.CoordinationV1Api(as_driver)
    owner = client.V1OwnerReference(
        api_version="v1", kind="Pod", name="counts-1-driver", uid=driver.metadata.uid
    )
    local_state = f"/var/lib/ftspark/local-state/jobs/{jobs_ns}/{uuid.uuid4()}"

    def refused(body: client.V1Pod) -> str:
        with pytest.raises(client.ApiException) as error:
            driver_core.create_namespaced_pod(jobs_ns, body)
        assert error.value.status == 403, error.value.body
        return str(error.value.body)

    def privileged_refused() -> bool:
        body = _pod("privileged", owner=owner, privileged=True)
        try:
            driver_core.create_namespaced_pod(jobs_ns, body)
        except client.ApiException as error:
            return error.status == 403 and "privileged container" in str(error.body)
        core.delete_namespaced_pod("privileged", jobs_ns)  # admitted: the policy is not loaded yet
        return False

    eventually(privileged_refused, timeout=20, what="the driver admission policy in force")
    assert "no directory of the node" in refused(_pod("rooted", owner=owner, host_path="/"))
    assert "no directory of the node" in refused(_pod("own-dir", owner=owner, host_path=local_state))
    assert "node's namespaces" in refused(_pod("host-pid", owner=owner, host_pid=True))
    assert "its own executors" in refused(_pod("stray", spark_role="executor"))  # no owner: outlives the job
    assert "ftspark-driver" in refused(_pod("other-sa", owner=owner, service_account="default"))
    # What Spark's executor pods are: admitted, localRecovery's claim included.
    driver_core.create_namespaced_pod(jobs_ns, _pod("counts-exec-1", owner=owner, claim="counts-local-state"))

    for name, allowed in (("counts-checkpoints", True), ("other-checkpoints", False)):
        record = driver_core.read_namespaced_config_map(name, jobs_ns)
        record.data = {"counter": "9"}
        if allowed:
            driver_core.replace_namespaced_config_map(name, jobs_ns, record)
        else:
            with pytest.raises(client.ApiException) as error:
                driver_core.replace_namespaced_config_map(name, jobs_ns, record)
            assert error.value.status == 403 and "counts-checkpoints, not other" in str(error.value.body)
    for name, allowed in (("counts-driver", True), ("other-driver", False)):
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=name), spec=client.V1LeaseSpec(holder_identity="x")
        )
        if allowed:
            driver_leases.create_namespaced_lease(jobs_ns, lease)
        else:
            with pytest.raises(client.ApiException) as error:
                driver_leases.create_namespaced_lease(jobs_ns, lease)
            assert error.value.status == 403 and "Lease counts-driver, not other" in str(error.value.body)
    # A token of the ServiceAccount bound to no driver pod (one an admin minted) creates nothing at all.
    unbound = client.CoreV1Api(
        config.new_client_from_config(
            config_file=str(control_plane.kubeconfig_for_service_account(jobs_ns, DRIVER_SERVICE_ACCOUNT))
        )
    )
    with pytest.raises(client.ApiException) as error:
        unbound.create_namespaced_pod(jobs_ns, _pod("counts-exec-2", owner=owner))
    assert error.value.status == 403 and "driver pod's own token" in str(error.value.body)


def _driver_of_counts(
    core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api, namespace: str
) -> client.V1Pod:
    """The driver's identity, as the operator makes it, and a driver pod of job "counts"."""
    meta = client.V1ObjectMeta(name=DRIVER_SERVICE_ACCOUNT)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=meta))
    rbac.create_namespaced_role(namespace, client.V1Role(metadata=meta, rules=list(DRIVER_RULES)))
    subject = client.RbacV1Subject(kind="ServiceAccount", name=DRIVER_SERVICE_ACCOUNT, namespace=namespace)
    role = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=DRIVER_SERVICE_ACCOUNT)
    rbac.create_namespaced_role_binding(
        namespace, client.V1RoleBinding(metadata=meta, role_ref=role, subjects=[subject])
    )
    return core.create_namespaced_pod(namespace, _pod("counts-1-driver", spark_role="driver"))


def _pod(
    name: str,
    *,
    spark_role: str = "executor",
    owner: client.V1OwnerReference | None = None,
    service_account: str = DRIVER_SERVICE_ACCOUNT,
    privileged: bool = False,
    host_pid: bool = False,
    host_path: str = "",
    claim: str = "",
) -> client.V1Pod:
    """A pod as Spark makes an executor (labels, owner reference to its driver, ServiceAccount), or with one
    hostile change."""
    volumes = []
    if host_path:
        volumes.append(client.V1Volume(name="local", host_path=client.V1HostPathVolumeSource(path=host_path)))
    if claim:
        source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
        volumes.append(client.V1Volume(name="local", persistent_volume_claim=source))
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            labels={"spark-role": spark_role, "spark-app-selector": "ftspark-0123abcd-1"},
            owner_references=[owner] if owner else None,
        ),
        spec=client.V1PodSpec(
            service_account_name=service_account,
            host_pid=host_pid or None,
            containers=[
                client.V1Container(
                    name="spark",
                    image="spark:test",
                    security_context=client.V1SecurityContext(privileged=True) if privileged else None,
                )
            ],
            volumes=volumes or None,
        ),
    )
