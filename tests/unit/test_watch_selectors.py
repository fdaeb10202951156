"""The operator's pod and ConfigMap watches carry label selectors: the API server sends it the jobs' pods and
the checkpoint records drivers wrote only, never the job graphs, its own fence advances or anything else of
the namespaces it manages. Of an executor's events, only its end wakes its job, once."""

from __future__ import annotations

from typing import Any

import kopf

from ftspark.handlers.watch import ExecutorEnds, watch_settings

PODS = kopf.Resource(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
CONFIG_MAPS = kopf.Resource(group="", version="v1", plural="configmaps", kind="ConfigMap", namespaced=True)
JOBS = kopf.Resource(
    group="ftspark.io", version="v1alpha1", plural="faulttolerantsparkjobs", kind="FaultTolerantSparkJob"
)


def test_the_api_server_filters_what_the_watches_receive() -> None:
    selectors = watch_settings().watching.label_selectors
    # What kopf joins into the labelSelector parameter of each watch request.
    assert selectors.collect(PODS) == ["ftspark.io/job"], "drivers, standbys and executors of jobs"
    assert selectors.collect(CONFIG_MAPS) == [
        "ftspark.io/store=checkpoints,ftspark.io/job,ftspark.io/writer!=operator"
    ]
    assert selectors.collect(JOBS) == [], "every job is the operator's business"


def _executor(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-1-exec-1"},
        "spec": {"containers": [{"name": "executor"}]},
        "status": {"containerStatuses": [{"name": "executor", "ready": False, "state": state}]},
    }


RUNNING = _executor({"running": {"startedAt": "2026-11-30T00:00:00Z"}})
ENDED = _executor({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-30T00:00:01Z"}})


def test_an_executor_wakes_its_job_once_when_it_ends_or_goes() -> None:
    ends = ExecutorEnds()
    assert not ends.wakes("ADDED", "a", RUNNING), "a start wakes nothing"
    assert not ends.wakes("MODIFIED", "a", RUNNING), "nor a deletion asked for, the executor still running"
    assert ends.wakes("MODIFIED", "a", ENDED), "its kubelet reported it ended: a restart may go on"
    assert not ends.wakes("MODIFIED", "a", ENDED), "its later changes say nothing new"
    assert not ends.wakes("DELETED", "a", ENDED), "nor its removal"
    # Gone without an end reported (a lost node's executor, removed at once): its removal wakes the job.
    assert ends.wakes("DELETED", "b", RUNNING)
    assert ends.wakes("ADDED", "c", ENDED), "an ended executor met at the watch's (re)start"
