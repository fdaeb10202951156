"""observe_driver: every state a driver pod can be in, as the API server serves it, and what it means."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from ftspark.domain.lifecycle import (
    DRIVER_UNSCHEDULABLE,
    DRIVER_VOLUME_NOT_BOUND,
    NODE_LOST,
    DriverObservation,
    DriverPhase,
    RefusedPromotion,
    SavepointReport,
)
from ftspark.protocol import (
    ATTEMPT_LABEL,
    CONTROL_ANNOTATION,
    CONTROL_REFUSED_ANNOTATION,
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    JOB_LABEL,
    NO_RESTORABLE_CHECKPOINT,
    ROLE_LABEL,
    ROLLBACK_ANNOTATION,
    SAVEPOINT_ANNOTATION,
    SPEC_HASH_LABEL,
    STANDBY_LABEL,
    Exit,
    TerminationMessage,
)
from ftspark.reconcile.driver_pods import (
    MAX_DRIVER_TEXT,
    MAX_ROLLBACKS,
    executor_ended,
    observe_driver,
    waiting_cause,
)

Pod = dict[str, Any]
NAME = "job-1-driver"
STARTED = "2026-01-01T00:00:00Z"
DELETED = "2026-01-01T00:05:00Z"


def pod(
    status: Pod | None = None,
    *,
    attempt: str | None = "1",
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
) -> Pod:
    labels = {JOB_LABEL: "job", ROLE_LABEL: "driver"} | (
        {ATTEMPT_LABEL: attempt} if attempt is not None else {}
    )
    metadata: Pod = {"name": NAME, "namespace": "ns", "uid": "u-1", "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    if deleting:
        metadata |= {"deletionTimestamp": DELETED, "deletionGracePeriodSeconds": 30}
    body: Pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "node-a"}}
    if status is not None:
        body["status"] = status
    return body


def container(state: Pod, *, name: str = DRIVER_CONTAINER, ready: bool = False) -> Pod:
    return {"name": name, "image": "img", "ready": ready, "restartCount": 0, "state": state}


def ready(value: str) -> Pod:
    return {"type": "Ready", "status": value, "lastTransitionTime": STARTED}


NO_CPU = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No victims"
UNBOUND = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: not helpful"


def unschedulable(message: str) -> Pod:
    """As the scheduler leaves a pod no node takes: no container status yet."""
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {"phase": "Pending", "conditions": [scheduled]}


def waiting(reason: str, message: str = "") -> Pod:
    state = {"waiting": {"reason": reason} | ({"message": message} if message else {})}
    return {"phase": "Pending", "conditions": [ready("False")], "containerStatuses": [container(state)]}


RUNNING = {"running": {"startedAt": STARTED}}


def running(*, condition: str = "True", containers_ready: bool = True) -> Pod:
    return {
        "phase": "Running",
        "conditions": [ready(condition)],
        "containerStatuses": [container(RUNNING, ready=containers_ready)],
    }


def exited(code: int, reason: str, message: str = "") -> Pod:
    terminated = {"exitCode": code, "reason": reason, "startedAt": STARTED, "finishedAt": DELETED}
    state = {"terminated": terminated | ({"message": message} if message else {})}
    phase = "Succeeded" if code == 0 else "Failed"
    return {"phase": phase, "conditions": [ready("False")], "containerStatuses": [container(state)]}


def said(reason: str, code: int, message: str) -> str:
    """The runtime's termination message (runtime/termination.py)."""
    words = TerminationMessage(reason=reason, exit_code=code, message=message, last_committed={"q": 4})
    return words.model_dump_json(by_alias=True)


def seen(
    phase: DriverPhase, *, code: int | None = None, reason: str = "", message: str = "", **more: Any
) -> DriverObservation:
    if more.get("ended") and code is not None:  # a container the kubelet saw end (exited: finishedAt)
        more.setdefault("ended_at", datetime.fromisoformat(DELETED))
    return DriverObservation(1, NAME, phase, code, reason, message, **more)


LOST = "node node-a stopped reporting; the driver is presumed lost"
EVICTED = "The node was low on resource: memory. Container driver was using 3Gi, which exceeds its request."


@pytest.mark.parametrize(
    ("status", "deleting", "expected"),
    [
        pytest.param(None, False, seen(DriverPhase.PENDING), id="no-status-yet"),
        pytest.param({"phase": "Pending"}, False, seen(DriverPhase.PENDING), id="pending-unscheduled"),
        pytest.param(
            unschedulable(NO_CPU),
            False,
            seen(
                DriverPhase.PENDING,
                reason=DRIVER_UNSCHEDULABLE,
                message=f"no node can run the driver pod: {NO_CPU}",
            ),
            id="unschedulable",
        ),
        pytest.param(
            unschedulable(UNBOUND),
            False,
            seen(
                DriverPhase.PENDING,
                reason=DRIVER_VOLUME_NOT_BOUND,
                message=f"the driver pod's volume is not bound: {UNBOUND}",
            ),
            id="volume-not-bound",
        ),
        pytest.param(
            waiting("ContainerCreating"),
            False,
            seen(DriverPhase.PENDING, reason="ContainerCreating"),
            id="creating",
        ),
        pytest.param(
            waiting("ImagePullBackOff", 'Back-off pulling image "img"'),
            False,
            seen(DriverPhase.PENDING, reason="ImagePullBackOff", message='Back-off pulling image "img"'),
            id="image-pull-backoff",
        ),
        pytest.param(
            waiting("ErrImagePull", "manifest unknown"),
            False,
            seen(DriverPhase.PENDING, reason="ErrImagePull", message="manifest unknown"),
            id="err-image-pull",
        ),
        pytest.param(
            waiting("InvalidImageName", 'Failed to apply default image tag "IMG"'),
            False,
            seen(
                DriverPhase.PENDING,
                reason="InvalidImageName",
                message='Failed to apply default image tag "IMG"',
            ),
            id="invalid-image-name",
        ),
        pytest.param(
            waiting("CreateContainerConfigError", 'secret "s3" not found'),
            False,
            seen(DriverPhase.PENDING, reason="CreateContainerConfigError", message='secret "s3" not found'),
            id="create-container-config-error",
        ),
        pytest.param(
            running(),
            False,
            seen(DriverPhase.RUNNING, started_at=datetime(2026, 1, 1, tzinfo=UTC), ready=True),
            id="running",
        ),
        pytest.param(
            running(condition="False", containers_ready=False),
            False,
            seen(DriverPhase.RUNNING, started_at=datetime(2026, 1, 1, tzinfo=UTC)),
            id="running-not-ready-is-no-lost-node",
        ),
        pytest.param(
            {"phase": "Pending", "containerStatuses": [container(RUNNING)]},
            False,
            seen(DriverPhase.PENDING),
            id="container-running-before-the-pod-phase-says-so",
        ),
        pytest.param(
            exited(Exit.FINISHED, "Completed"),
            False,
            seen(DriverPhase.SUCCEEDED, code=0, reason="Completed", ended=True),
            id="exit-0",
        ),
        pytest.param(
            exited(Exit.FINISHED, "Completed", said("Stopped", 0, "stopped with a final checkpoint")),
            False,
            seen(
                DriverPhase.SUCCEEDED,
                code=0,
                reason="Stopped",
                message="stopped with a final checkpoint",
                ended=True,
            ),
            id="exit-0-with-the-runtimes-words",
        ),
        pytest.param(
            exited(Exit.SCRIPT_FAILED, "Error", "Traceback ...\nZeroDivisionError"),
            False,
            seen(
                DriverPhase.FAILED,
                code=1,
                reason="Error",
                message="Traceback ...\nZeroDivisionError",
                ended=True,
            ),
            id="exit-1-log-tail",
        ),
        pytest.param(
            exited(Exit.SCRIPT_FAILED, "Error", said("ScriptFailed", 1, "ZeroDivisionError: division")),
            False,
            seen(
                DriverPhase.FAILED,
                code=1,
                reason="ScriptFailed",
                message="ZeroDivisionError: division",
                ended=True,
            ),
            id="exit-1-script-failed",
        ),
        pytest.param(
            exited(Exit.BAD_INPUT, "Error", said(NO_RESTORABLE_CHECKPOINT, 2, "no restorable batch")),
            False,
            seen(
                DriverPhase.FAILED,
                code=2,
                reason=NO_RESTORABLE_CHECKPOINT,
                message="no restorable batch",
                ended=True,
            ),
            id="exit-2-no-restorable-checkpoint",
        ),
        pytest.param(
            exited(Exit.FENCED_OUT, "Error", said("LeaseLost", 3, "fenced out by attempt 2")),
            False,
            seen(
                DriverPhase.FAILED, code=3, reason="LeaseLost", message="fenced out by attempt 2", ended=True
            ),
            id="exit-3-fenced-out",
        ),
        pytest.param(
            exited(137, "OOMKilled"),
            False,
            seen(DriverPhase.FAILED, code=137, reason="OOMKilled", ended=True),
            id="exit-137-oom",
        ),
        pytest.param(
            exited(143, "Error"),
            False,
            seen(DriverPhase.FAILED, code=143, reason="Error", ended=True),
            id="exit-143-sigterm",
        ),
        pytest.param(
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": EVICTED,
                "containerStatuses": [container(RUNNING)],
            },
            False,
            seen(DriverPhase.FAILED, reason="Evicted", message=EVICTED),
            id="evicted",
        ),
        pytest.param(
            {"phase": "Failed"},
            False,
            seen(DriverPhase.FAILED, reason="PodFailed"),
            id="failed-without-reason",
        ),
        pytest.param(
            {"phase": "Unknown"}, False, seen(DriverPhase.FAILED, reason=NODE_LOST), id="phase-unknown"
        ),
        pytest.param(
            running(condition="False"),
            False,
            seen(DriverPhase.FAILED, reason=NODE_LOST, message=LOST, node_lost=True),
            id="node-lost",
        ),
        pytest.param(
            running(condition="False"),
            True,
            seen(DriverPhase.TERMINATING, reason=NODE_LOST, node_lost=True),
            id="node-lost-while-deleting",
        ),
        pytest.param(running(), True, seen(DriverPhase.TERMINATING, ready=True), id="deleting"),
        pytest.param(
            exited(0, "Completed"), True, seen(DriverPhase.TERMINATING, ended=True), id="deleting-after-exit"
        ),
        pytest.param(
            {"phase": "Succeeded"},
            False,
            seen(DriverPhase.SUCCEEDED, code=0),
            id="succeeded-without-containers",
        ),
        pytest.param(
            {
                "phase": "Running",
                "conditions": [ready("False")],
                "containerStatuses": [
                    container(RUNNING, name="log-shipper", ready=True),
                    container({"terminated": {"exitCode": 1, "reason": "Error"}}),
                ],
            },
            False,
            seen(DriverPhase.FAILED, code=1, reason="Error", ended=True, ended_at=None),
            id="sidecar-listed-first",
        ),
        pytest.param(
            {"phase": "Running", "containerStatuses": [container(RUNNING, name="main")]},
            False,
            seen(DriverPhase.RUNNING, started_at=datetime(2026, 1, 1, tzinfo=UTC)),
            id="no-container-named-driver-takes-the-first",
        ),
    ],
)
def test_phase(status: Pod | None, deleting: bool, expected: DriverObservation) -> None:
    assert observe_driver(pod(status, deleting=deleting)) == replace(expected, node="node-a")


@pytest.mark.parametrize(
    ("labels", "condition", "standby", "spec_hash", "is_ready"),
    [
        pytest.param({STANDBY_LABEL: "true", SPEC_HASH_LABEL: "abc"}, "True", True, "abc", True, id="ready"),
        pytest.param({STANDBY_LABEL: "true"}, "False", True, "", False, id="session-not-up"),
        pytest.param({SPEC_HASH_LABEL: "abc"}, "True", False, "abc", True, id="promoted"),
    ],
)
def test_a_standby_is_told_by_its_label_and_its_readiness(
    labels: dict[str, str], condition: str, standby: bool, spec_hash: str, is_ready: bool
) -> None:
    body = pod(running(condition=condition, containers_ready=is_ready))
    body["metadata"]["labels"] |= labels
    observed = observe_driver(body)
    assert observed is not None
    assert (observed.standby, observed.spec_hash, observed.ready) == (standby, spec_hash, is_ready)
    assert observed.phase == DriverPhase.RUNNING and not observed.node_lost


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            {"id": "sp-1-a1", "location": "s3://b/job/savepoints/sp-1-a1", "batches": {"q0": 7, "q1": 5}},
            SavepointReport("sp-1-a1", "s3://b/job/savepoints/sp-1-a1", batch_id=5),
            id="ok-lowest-batch",
        ),
        pytest.param(
            {"id": "sp-1-a1", "location": "s3://b/job/savepoints/sp-1-a1"},
            SavepointReport("sp-1-a1", "s3://b/job/savepoints/sp-1-a1"),
            id="ok-without-batches",
        ),
        pytest.param(
            {"id": "sp-1-a1", "error": "no committed batch yet"},
            SavepointReport("sp-1-a1", error="no committed batch yet"),
            id="error",
        ),
    ],
)
def test_savepoint_answer(answer: Pod, expected: SavepointReport) -> None:
    observed = observe_driver(pod(running(), annotations={SAVEPOINT_ANNOTATION: json.dumps(answer)}))
    assert observed is not None
    assert observed.savepoint == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param('{"id": "sp-1-a1",', "Invalid JSON", id="unreadable-json"),
        pytest.param('{"location": "s3://b/x"}', "id: Field required", id="missing-id"),
        pytest.param('{"id": "sp-1-a1", "batches": {"q0": "seven"}}', "batches.q0:", id="batch-not-a-number"),
        pytest.param('{"id": "sp-1-a1", "batches": {"q0": -1}}', "batches.q0:", id="negative-batch"),
        pytest.param('["sp-1-a1"]', "Input should be an object", id="not-an-object"),
    ],
)
def test_unreadable_savepoint_answer_is_a_report_with_an_error(raw: str, problem: str) -> None:
    observed = observe_driver(pod(running(), annotations={SAVEPOINT_ANNOTATION: raw}))
    assert observed is not None and observed.savepoint is not None
    assert observed.savepoint.id == ""
    assert observed.savepoint.error.startswith(f"unreadable savepoint answer {raw!r}: ")
    assert problem in observed.savepoint.error
    assert "\n" not in observed.savepoint.error  # it becomes an Event's message


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, (), id="none"),
        pytest.param(
            {ROLLBACK_ANNOTATION: json.dumps(["q0: batch 9 -> 8 (commits/9 unreadable)"])},
            ("q0: batch 9 -> 8 (commits/9 unreadable)",),
            id="list",
        ),
        pytest.param({ROLLBACK_ANNOTATION: "[1"}, ("unreadable rollback report '[1'",), id="unreadable-json"),
        pytest.param(
            {ROLLBACK_ANNOTATION: '"q0: batch 9"'},
            ("unreadable rollback report '\"q0: batch 9\"'",),
            id="not-a-list",
        ),
    ],
)
def test_rollbacks(annotations: dict[str, str], expected: tuple[str, ...]) -> None:
    observed = observe_driver(pod(running(), annotations=annotations))
    assert observed is not None
    assert observed.rollbacks == expected
    assert observed.savepoint is None


@pytest.mark.parametrize(
    ("annotations", "refused"),
    [
        pytest.param({}, False, id="none"),
        pytest.param({CONTROL_ANNOTATION: "stop@x;term=3"}, False, id="asked, not refused"),
        pytest.param(
            {CONTROL_ANNOTATION: "stop@x;term=3", CONTROL_REFUSED_ANNOTATION: '{"request": "stop@x;term=3"}'},
            True,
            id="the request on the pod refused",
        ),
        pytest.param(
            {CONTROL_ANNOTATION: "stop@y;term=4", CONTROL_REFUSED_ANNOTATION: '{"request": "stop@x;term=3"}'},
            False,
            id="an earlier request refused, asked again since",
        ),
        pytest.param(
            {CONTROL_ANNOTATION: "stop@x;term=3", CONTROL_REFUSED_ANNOTATION: "stop@x;term=3"},
            False,
            id="unreadable refusal",
        ),
    ],
)
def test_a_refused_request(annotations: dict[str, str], refused: bool) -> None:
    observed = observe_driver(pod(running(), annotations=annotations))
    assert observed is not None
    assert observed.request_refused is refused


@pytest.mark.parametrize(
    ("request_", "refused", "expected"),
    [
        pytest.param("promote@7;term=3", True, RefusedPromotion(7), id="a batch"),
        pytest.param("promote@;term=3", True, RefusedPromotion(None), id="the latest"),
        pytest.param("promote@7;term=3", False, None, id="not refused"),
        pytest.param("stop@x;term=3", True, None, id="no promotion"),
    ],
)
def test_a_refused_promotion_names_its_batch(
    request_: str, refused: bool, expected: RefusedPromotion | None
) -> None:
    annotations = {CONTROL_ANNOTATION: request_}
    if refused:
        annotations[CONTROL_REFUSED_ANNOTATION] = json.dumps({"request": request_})
    observed = observe_driver(pod(running(), annotations=annotations))
    assert observed is not None
    assert observed.refused_promotion == expected


def test_attempt_comes_from_the_label() -> None:
    observed = observe_driver(pod(running(), attempt="12"))
    assert observed is not None and observed.attempt == 12


@pytest.mark.parametrize(
    "attempt",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param("one", id="not-a-number"),
        pytest.param("-1", id="negative"),
        pytest.param("1_0", id="underscored"),
    ],
)
def test_a_pod_without_an_attempt_number_is_no_driver(
    attempt: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    assert observe_driver(pod(running(), attempt=attempt)) is None
    assert f"ignoring pod {NAME}" in caplog.text


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"metadata": {"labels": {ATTEMPT_LABEL: "1"}}}, id="no-name"),
        pytest.param(
            pod({"phase": "Running", "containerStatuses": [{"ready": True}]}), id="container-without-name"
        ),
    ],
)
def test_a_body_that_is_no_pod_is_no_driver(body: Pod, caplog: pytest.LogCaptureFixture) -> None:
    assert observe_driver(body) is None
    assert "ignoring a driver pod that is no pod" in caplog.text


def _with_spec(body: Pod, **spec: Any) -> Pod:
    body["spec"] |= spec
    return body


@pytest.mark.parametrize(
    ("body", "ended"),
    [
        pytest.param(pod(exited(137, "OOMKilled")), True, id="killed"),
        pytest.param(pod(exited(0, "Completed")), True, id="finished"),
        pytest.param(pod(exited(143, "Error"), deleting=True), True, id="killed-while-deleting"),
        pytest.param(pod(running()), False, id="running"),
        pytest.param(pod(running(condition="False")), False, id="node-lost"),
        pytest.param(
            pod(exited(137, "ContainerStatusUnknown")), False, id="container-the-kubelet-could-not-find"
        ),
        pytest.param(
            pod({"phase": "Failed", "reason": "Evicted", "containerStatuses": [container(RUNNING)]}),
            False,
            id="evicted-container-still-reported-running",
        ),
        pytest.param(pod({"phase": "Failed"}), False, id="failed-without-container-statuses"),
        pytest.param(
            pod(
                {
                    "phase": "Running",
                    "containerStatuses": [
                        container({"terminated": {"exitCode": 1, "reason": "Error"}}, name="log-shipper"),
                        container(RUNNING),
                    ],
                }
            ),
            False,
            id="a-sidecar-ended-not-the-driver",
        ),
        # A shared PID namespace outlives the driver container's first process: its others may still run.
        pytest.param(
            _with_spec(pod(exited(137, "Error")), shareProcessNamespace=True),
            False,
            id="shared-pid-namespace",
        ),
        pytest.param(_with_spec(pod(exited(137, "Error")), hostPID=True), False, id="host-pid-namespace"),
    ],
)
def test_ended_only_on_the_kubelets_word_that_nothing_of_the_driver_runs(body: Pod, ended: bool) -> None:
    observed = observe_driver(body)
    assert observed is not None
    assert observed.ended is ended


def _executor(*statuses: Pod, phase: str = "Failed", **spec: object) -> Pod:
    return _with_spec(pod({"phase": phase, "containerStatuses": list(statuses)}, attempt=None), **spec)


EXECUTOR_KILLED = container({"terminated": {"exitCode": 1, "reason": "Error"}}, name=EXECUTOR_CONTAINER)
EXECUTOR_RUNNING = container(RUNNING, name=EXECUTOR_CONTAINER, ready=True)


@pytest.mark.parametrize(
    ("body", "ended"),
    [
        pytest.param(_executor(EXECUTOR_KILLED), True, id="exited"),
        pytest.param(_executor(EXECUTOR_RUNNING, phase="Running"), False, id="running"),
        pytest.param(
            _executor(container({"terminated": {"exitCode": 0}}, name="log-shipper"), EXECUTOR_RUNNING),
            False,
            id="a-sidecar-ended-not-the-executor",
        ),
        pytest.param(
            _executor(EXECUTOR_KILLED, shareProcessNamespace=True), False, id="shared-pid-namespace"
        ),
        pytest.param({"kind": "Pod", "status": "?"}, False, id="no-pod"),
    ],
)
def test_an_executor_ended_on_the_same_word_as_a_driver(body: Pod, ended: bool) -> None:
    """What the operator no longer waits for before the next attempt, and removes at once."""
    assert executor_ended(body) is ended


def test_what_a_driver_writes_reaches_the_status_bounded() -> None:
    """A job's code chooses its driver's annotations and termination message (up to the API server's
    256 KiB): cut to MAX_DRIVER_TEXT before they reach the status or an Event."""
    huge = "x" * 200_000
    words = json.dumps({"reason": "ScriptFailed", "message": huge})
    ended = {
        "phase": "Failed",
        "conditions": [ready("False")],
        "containerStatuses": [
            container({"terminated": {"exitCode": 1, "reason": "Error", "message": words}})
        ],
    }
    annotations = {
        SAVEPOINT_ANNOTATION: json.dumps({"id": "sp-1", "error": huge}),
        ROLLBACK_ANNOTATION: json.dumps([huge] * 1000),
    }
    observed = observe_driver(pod(ended, annotations=annotations))
    assert observed is not None and observed.savepoint is not None
    texts = [observed.message, observed.savepoint.error, *observed.rollbacks]
    assert all(len(text) == MAX_DRIVER_TEXT and text.endswith("…") for text in texts)
    assert len(observed.rollbacks) == MAX_ROLLBACKS
    long_location = {"id": "sp-1", "location": f"s3://b/{huge}"}
    answered = observe_driver(pod(running(), annotations={SAVEPOINT_ANNOTATION: json.dumps(long_location)}))
    assert answered is not None and answered.savepoint is not None
    assert (answered.savepoint.id, answered.savepoint.location) == ("", "")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            unschedulable(NO_CPU),
            (DRIVER_UNSCHEDULABLE, f"no node can run the executor pod: {NO_CPU}"),
            id="no-node",
        ),
        pytest.param(
            waiting("ErrImagePull", "manifest unknown"), ("ErrImagePull", "manifest unknown"), id="image"
        ),
        pytest.param(waiting("ContainerCreating"), None, id="creating-is-no-cause"),
        pytest.param(running(), None, id="running"),
        pytest.param({"phase": "Pending"}, None, id="not-scheduled-yet"),
    ],
)
def test_what_an_executor_pod_waits_for(status: Pod, expected: tuple[str, str] | None) -> None:
    cause = waiting_cause({"metadata": {"name": "job-1-exec-1"}, "status": status}, "executor")
    assert (None if cause is None else (cause.reason, cause.message)) == expected
