"""An ended driver's log is kept in the job's own ConfigMap (never in another object of that name), and
`ftspark logs` reads it once the pod is gone. The log of a pod the kubelet serves is proven on real nodes
(tests/realnodes/test_installation.py); here no kubelet answers, which is kept as a line saying so."""

from __future__ import annotations

import pytest
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import job_resource
from ftspark.adapters.k8s.driver_logs import KubeDriverLogs, log_key
from ftspark.cli import main
from ftspark.domain.ha import JobKey
from ftspark.ports.cluster import DriverLogNotKeptError, JobResource
from ftspark.protocol import driver_logs_name, driver_pod_name
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest


def _job(api_client: client.ApiClient, namespace: str, name: str) -> JobResource:
    created = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, "bucket")
    )
    return job_resource(JobKey(namespace=namespace, name=name), created)


def _driver_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """A pod on a node that does not exist: no kubelet will ever serve its log."""
    spec = {"nodeName": "gone-node", "containers": [{"name": "driver", "image": "spark:4"}]}
    core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})


def test_the_newest_attempts_logs_are_kept_in_the_jobs_config_map_and_read_after_the_pod(
    crd: None,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    core = client.CoreV1Api(api_client)
    job = _job(api_client, namespace, "logged")
    logs = KubeDriverLogs(api_client)
    for attempt in (1, 2, 3):
        pod = driver_pod_name("logged", attempt)
        _driver_pod(core, namespace, pod)
        logs.keep(job, pod, attempt, kept=2)
        core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
    kept = core.read_namespaced_config_map(driver_logs_name("logged"), namespace)
    assert sorted(kept.data) == [log_key(2), log_key(3)], "the newest 2 attempts"
    assert "logged-3-driver's log could not be read when it ended" in kept.data[log_key(3)]
    assert [owner.uid for owner in kept.metadata.owner_references] == [job.uid], "goes with the job"
    logs.keep(job, driver_pod_name("logged", 3), 3, kept=2)
    again = core.read_namespaced_config_map(driver_logs_name("logged"), namespace)
    assert again.metadata.resource_version == kept.metadata.resource_version, "kept once"

    base = ["--kubeconfig", str(control_plane.kubeconfig), "-n", namespace, "logs", "logged"]
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
        API_GROUP, API_VERSION, namespace, PLURAL, "logged", {"status": {"attempt": 3}}
    )
    assert main(base) == 0, "the current attempt's, its pod gone"
    shown = capsys.readouterr()
    assert "logged-3-driver's log could not be read" in shown.out
    assert "pod logged-3-driver is gone; the end of its log" in shown.err
    describe = ["--kubeconfig", str(control_plane.kubeconfig), "-n", namespace, "describe", "logged"]
    assert main(describe) == 0
    assert "kept logs:      attempts 2, 3 (ftspark logs logged --attempt N)" in capsys.readouterr().out
    assert main([*base, "--attempt", "1"]) == 1
    said = capsys.readouterr().err
    assert "attempt 1's driver log is not there" in said
    assert "(attempts: 2, 3; spec.failureHistory says how many are kept)" in said
    assert main([*base, "--executor", "1"]) == 1, "an executor's log is not kept"
    said = capsys.readouterr().err
    assert "executor 1 of attempt 3 has no pod; its executors now: none" in said
    assert "the driver's log has a failed task's error: ftspark logs logged --attempt 3" in said


def test_a_config_map_of_that_name_not_the_jobs_is_left_as_it_is(
    crd: None, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    job = _job(api_client, namespace, "squatted")
    name = driver_logs_name("squatted")
    core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": {"mine": "keep"}})
    _driver_pod(core, namespace, driver_pod_name("squatted", 1))
    with pytest.raises(DriverLogNotKeptError, match=f"ConfigMap {namespace}/{name} exists and is not"):
        KubeDriverLogs(api_client).keep(job, driver_pod_name("squatted", 1), 1, kept=3)
    assert core.read_namespaced_config_map(name, namespace).data == {"mine": "keep"}
