"""`helm install` onto the local control plane: the operator, running with the chart's own ServiceAccount and
RBAC (namespaced mode), does its job and is denied the rest."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark_dev.controlplane import ControlPlane
from ftspark_dev.operators import OperatorFleet, job_manifest, pod_names
from ftspark_dev.s3server import S3Server
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
    token = core.create_namespaced_service_account_token(
        "ftspark-operator",
        operator_ns,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    ).status.token
    as_operator = control_plane.kubeconfig_for_token(token, f"operator-{operator_ns}")

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
    finally:
        fleet.stop_all()

    operator = config.new_client_from_config(config_file=str(as_operator))
    denied: list[Callable[[], object]] = [
        partial(client.CoreV1Api(operator).list_namespaced_secret, jobs_ns),
        partial(client.CoreV1Api(operator).read_namespaced_secret, "charted-1-driver-rpc", jobs_ns),
        partial(client.CoreV1Api(operator).delete_collection_namespaced_pod, jobs_ns),
        partial(client.CoreV1Api(operator).list_node),
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
