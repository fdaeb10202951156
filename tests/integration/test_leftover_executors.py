"""Attempt N+1 never starts beside an executor of attempt N: executors are owned by their driver pod and go
only when the garbage collector gets to them, and attempt N+1 reuses the checkpoint directory their tasks may
still write state files into. The operator deletes them and creates the next driver once none runs: the
executor's end, as its kubelet reports it, wakes the job at once (its pod watch), not at a later look."""

from __future__ import annotations

import time

from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.domain.lifecycle.delays import EXECUTORS_RECHECK
from ftspark.protocol import JOB_LABEL, ROLE_LABEL, SPARK_APP_SELECTOR_LABEL, SPARK_ROLE_LABEL, spark_app_id
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    job_manifest,
    set_driver_exited,
    set_driver_running,
    set_executor_exited,
)
from tests.waiting import eventually

HOLD = "ftspark.test/hold"  # a finalizer: the executor stays, terminating, as on a slow kubelet


def test_the_next_driver_waits_until_the_previous_attempts_executor_is_gone(
    fleet: OperatorFleet, api_client: client.ApiClient, bucket: str
) -> None:
    ns, core = fleet.watch_namespace, client.CoreV1Api(api_client)
    fleet.start()

    def drivers() -> list[str]:
        found = core.list_namespaced_pod(ns, label_selector=f"{JOB_LABEL}=leftover,{ROLE_LABEL}=driver")
        return [pod.metadata.name for pod in found.items]

    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, job_manifest("leftover", bucket)
    )
    eventually(lambda: drivers() == ["leftover-1-driver"], timeout=30, what="driver 1")
    uid = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, "leftover"
    )["metadata"]["uid"]
    # An executor as Spark makes it (its labels, the job's label from the operator's sparkConf).
    executor = client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="leftover-1-exec-1",
            labels={
                JOB_LABEL: "leftover",
                SPARK_APP_SELECTOR_LABEL: spark_app_id(uid, 1),
                SPARK_ROLE_LABEL: "executor",
            },
            finalizers=[HOLD],
        ),
        spec=client.V1PodSpec(containers=[client.V1Container(name="executor", image="x")]),
    )
    core.create_namespaced_pod(ns, executor)
    set_driver_running(core, ns, "leftover-1-driver")
    set_driver_exited(core, ns, "leftover-1-driver", 1, "boom")
    eventually(
        lambda: core.read_namespaced_pod("leftover-1-exec-1", ns).metadata.deletion_timestamp,
        timeout=30,
        what=lambda: f"the leftover executor deleted\n{fleet.logs()}",
    )
    assert drivers() == [], "driver 1 is gone"
    time.sleep(4)  # past the restart delay (1 s)
    assert drivers() == [], "no driver 2 while an executor of attempt 1 runs"

    # Its kubelet reports it ended (it is still there, terminating): nothing of it runs any more.
    ended = time.monotonic()
    set_executor_exited(core, ns, "leftover-1-exec-1")
    try:
        eventually(
            lambda: drivers() == ["leftover-2-driver"],
            timeout=30,
            what=lambda: f"driver 2 once the executor ended\n{fleet.logs()}",
        )
        took = time.monotonic() - ended
        # The operator's own next look while executors end is EXECUTORS_RECHECK (10 s) after its last.
        assert took < EXECUTORS_RECHECK / 2, f"driver 2 came {took:.1f} s after the executor's end"
    finally:
        core.patch_namespaced_pod("leftover-1-exec-1", ns, {"metadata": {"finalizers": None}})
