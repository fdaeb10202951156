"""What a driver pod says about its attempt: a pure function from the pod's JSON to a DriverObservation.

The input is the pod exactly as the API server serves it (`kubectl get pod -o json`: camelCase keys, empty
fields left out). Only what is read is parsed, each shape by a small pydantic model that ignores the rest:

    metadata.labels        ftspark.io/attempt: which attempt the pod runs (without it, not one of ours);
                           ftspark.io/standby and ftspark.io/spec-hash: a standby, and for which spec
    metadata.annotations   the runtime's answers: the savepoint outcome and the rollbacks at start
    metadata.deletionTimestamp
                           being deleted: whatever it reports, the driver is going (Terminating)
    spec.nodeName          named when the node is lost
    spec.shareProcessNamespace, spec.hostPID
                           whether a terminated driver container proves its processes gone (ended)
    status.phase, reason, message
                           the kubelet's (or the eviction's) verdict on the pod as a whole
    status.conditions      Ready: a standby's readiness, and the lost-node check below; PodScheduled=False:
                           the scheduler's reason and message, why no node takes the pod
    status.containerStatuses
                           every container's ready flag (the lost-node check); the state of the driver's
                           (the one named "driver", else the first): waiting (reason, message), running
                           (startedAt) or terminated (exitCode, reason, message)

A lost node: the node controller marks the pods of a node that stopped reporting Ready=False and leaves
their container statuses as the kubelet last wrote them, ready ones included. The kubelet derives Ready from
its containers' readiness, so Ready=False while every container reports ready means nobody reports for this
pod any more (as would a readinessGate not yet met: ours declare none, unless a user's podTemplate adds one).
The driver is presumed lost, and a graceful deletion would never complete (no kubelet to confirm it):
node_lost. So is a running driver on a silent node whose driver Lease has not been renewed for its duration
(presumed_lost): the node controller's verdict would only come later.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from ftspark.domain.lifecycle import (
    DRIVER_UNSCHEDULABLE,
    DRIVER_VOLUME_NOT_BOUND,
    NODE_LOST,
    DriverObservation,
    DriverPhase,
    RefusedPromotion,
    SavepointReport,
)
from ftspark.ports.cluster import DriverLease
from ftspark.protocol import (
    ATTEMPT_LABEL,
    CONTROL_ANNOTATION,
    CONTROL_REFUSED_ANNOTATION,
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    ROLLBACK_ANNOTATION,
    SAVEPOINT_ANNOTATION,
    SPEC_HASH_LABEL,
    STANDBY_LABEL,
    ControlRequest,
    TerminationMessage,
    driver_lease_holder,
)

log = logging.getLogger(__name__)
# The kubelet's reason for a container it could not find in the runtime (after a restart): not proof that
# nothing of it runs.
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
# What a driver writes (its annotations, its termination message) is the job's code's to choose: every
# string of it that reaches the status or an Event is cut to this, and at most so many rollbacks are read.
MAX_DRIVER_TEXT = 1024
MAX_ROLLBACKS = 20


class _View(BaseModel):
    """camelCase on the wire; whatever is not read is ignored."""

    model_config = ConfigDict(alias_generator=to_camel, extra="ignore", frozen=True)


class Waiting(_View):
    reason: str = ""
    message: str = ""


class Running(_View):
    started_at: datetime | None = None


class Terminated(_View):
    exit_code: int
    reason: str = ""
    message: str = ""
    finished_at: datetime | None = None


class ContainerState(_View):
    waiting: Waiting | None = None
    running: Running | None = None
    terminated: Terminated | None = None


class ContainerStatus(_View):
    name: str
    ready: bool = False
    state: ContainerState = ContainerState()


class PodCondition(_View):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class PodStatus(_View):
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    conditions: list[PodCondition] = []
    container_statuses: list[ContainerStatus] = []


class PodSpec(_View):
    node_name: str = ""
    share_process_namespace: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")


class PodMetadata(_View):
    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deletion_timestamp: datetime | None = None


class PodView(_View):
    metadata: PodMetadata
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class RefusedRequest(_View):
    """The runtime's refusal of a control request (runtime/control.py): {"request", "reason"}."""

    request: str
    reason: str = ""


class SavepointAnswer(_View):
    """The runtime's answer (runtime/driver.py): {"id", "location", "batches": {query: batch}} or {"id",
    "error"}."""

    id: str
    location: str = ""
    batches: dict[str, NonNegativeInt] = {}  # the status refuses a negative batch
    error: str = ""


_ROLLBACKS = TypeAdapter(list[str])  # the runtime's rollbacks at start, one description each


def observe_driver(pod: Mapping[str, Any]) -> DriverObservation | None:
    """The attempt's driver as its pod shows it; None (with a warning) for a pod that cannot be one of our
    drivers: leaving it out beats failing the reconcile of the whole job."""
    try:
        view = PodView.model_validate(pod)
    except ValidationError as error:
        log.warning("ignoring a driver pod that is no pod: %s", _problems(error))
        return None
    label = view.metadata.labels.get(ATTEMPT_LABEL, "")
    # ASCII digits only: int() would also take "1_0" (label values may hold "_") and "-1".
    if not (label.isascii() and label.isdigit()):
        log.warning(
            "ignoring pod %s: label %s=%r is no attempt number", view.metadata.name, ATTEMPT_LABEL, label
        )
        return None
    annotations, labels = view.metadata.annotations, view.metadata.labels
    refused = _refused(annotations)
    return dataclasses.replace(
        _phase(view, int(label)),
        savepoint=_savepoint(annotations.get(SAVEPOINT_ANNOTATION, "")),
        rollbacks=_rollbacks(annotations.get(ROLLBACK_ANNOTATION, "")),
        request_refused=refused,
        refused_promotion=_refused_promotion(annotations) if refused else None,
        ended=_ended(view),
        standby=STANDBY_LABEL in labels,
        spec_hash=labels.get(SPEC_HASH_LABEL, ""),
        ready=_condition(view.status, "Ready") == "True",
        node=view.spec.node_name,
    )


def _phase(pod: PodView, attempt: int) -> DriverObservation:
    name, status = pod.metadata.name, pod.status
    driver = _container_status(status, DRIVER_CONTAINER)
    state = driver.state if driver is not None else ContainerState()
    lost = _on_lost_node(status)
    if pod.metadata.deletion_timestamp is not None:
        return DriverObservation(
            attempt, name, DriverPhase.TERMINATING, reason=NODE_LOST if lost else "", node_lost=lost
        )
    if lost:
        message = f"node {pod.spec.node_name} stopped reporting; the driver is presumed lost"
        return DriverObservation(attempt, name, DriverPhase.FAILED, None, NODE_LOST, message, node_lost=True)
    if (done := state.terminated) is not None:
        phase = DriverPhase.SUCCEEDED if done.exit_code == 0 else DriverPhase.FAILED
        words = _last_words(done.message)
        if words is None:  # killed, or the runtime never got to say (the message is the log's tail)
            reason, message = done.reason, done.message
        else:
            reason, message = words.reason, words.message
        return DriverObservation(
            attempt,
            name,
            phase,
            done.exit_code,
            _bounded(reason),
            _bounded(message),
            ended_at=done.finished_at,
        )
    if status.phase in {"Failed", "Unknown"}:  # e.g. evicted, or its node was lost
        reason = status.reason or (NODE_LOST if status.phase == "Unknown" else "PodFailed")
        return DriverObservation(attempt, name, DriverPhase.FAILED, None, reason, status.message)
    if status.phase == "Succeeded":
        return DriverObservation(attempt, name, DriverPhase.SUCCEEDED, 0)
    if state.running is not None and status.phase == "Running":
        return DriverObservation(attempt, name, DriverPhase.RUNNING, started_at=state.running.started_at)
    waiting = state.waiting or _unscheduled(status, "driver") or Waiting()
    return DriverObservation(
        attempt, name, DriverPhase.PENDING, None, waiting.reason, _bounded(waiting.message)
    )


def presumed_lost(driver: DriverObservation, lease: DriverLease, unchanged_for: float) -> DriverObservation:
    """The driver as lost (what the node controller's verdict makes of it) when it runs on a silent node and
    its own driver Lease has gone unrenewed for the Lease's duration by the operator's clock; else as it is.

    Either its renew watchdog ended it at the renew deadline (shorter than the duration), or it cannot act
    at all (frozen with its node, which thaws into a Lease held by its successor): nothing more of the
    verdict's own evidence, a node that stopped reporting, would come with waiting out the rest of the
    grace period. A driver whose Lease still changes is alive and heard by the API server (only its kubelet
    is not): it is left running. A Lease held by another (none yet, the previous attempt's) proves
    nothing of this driver, which then waits for the verdict as before."""
    silent_and_running = driver.node_silent and driver.phase == DriverPhase.RUNNING and not driver.standby
    if not silent_and_running or lease.holder != driver_lease_holder(driver.pod_name, driver.attempt):
        return driver
    if unchanged_for < lease.duration:
        return driver
    message = (
        f"node {driver.node} stopped reporting and the driver's Lease was not renewed for "
        f"{unchanged_for:.0f} s; the driver is presumed lost"
    )
    return dataclasses.replace(
        driver, phase=DriverPhase.FAILED, reason=NODE_LOST, message=message, node_lost=True
    )


def waiting_cause(pod: Mapping[str, Any], role: str) -> Waiting | None:
    """Why a pod (role: driver, executor) waits to run, in the scheduler's or the kubelet's words; None for a
    pod that runs, ended, or says nothing yet."""
    try:
        view = PodView.model_validate(pod)
    except ValidationError:
        return None
    if view.status.phase != "Pending":
        return None
    waiting = next((s.state.waiting for s in view.status.container_statuses if s.state.waiting), None)
    if waiting is not None and waiting.reason not in {"", "ContainerCreating", "PodInitializing"}:
        return Waiting(reason=waiting.reason, message=_bounded(waiting.message))
    return _unscheduled(view.status, role)


def _unscheduled(status: PodStatus, role: str) -> Waiting | None:
    """Why no node takes the pod, in the scheduler's words (PodScheduled=False, reason Unschedulable): an
    unbound PersistentVolumeClaim is told apart, as its fix is elsewhere (a StorageClass, a PV)."""
    scheduled = next((c for c in status.conditions if c.type == "PodScheduled"), None)
    if scheduled is None or scheduled.status != "False" or scheduled.reason != "Unschedulable":
        return None
    said = scheduled.message or "no node fits the pod"
    if "PersistentVolumeClaim" in said or "persistentvolumeclaim" in said:
        return Waiting(
            reason=DRIVER_VOLUME_NOT_BOUND, message=f"the {role} pod's volume is not bound: {said}"
        )
    return Waiting(reason=DRIVER_UNSCHEDULABLE, message=f"no node can run the {role} pod: {said}")


def _ended(pod: PodView, container: str = DRIVER_CONTAINER) -> bool:
    """The kubelet reported the container (the driver's, an executor's) terminated, and that means every
    process of it is gone: the container has a PID namespace of its own (no shareProcessNamespace, no
    hostPID), and the kernel kills every process in it when its first process dies, before the runtime
    reports the exit. Not on a lost node (nobody reports there), and not a ContainerStatusUnknown (the kubelet
    found no container to ask)."""
    if pod.spec.share_process_namespace or pod.spec.host_pid or _on_lost_node(pod.status):
        return False
    found = _container_status(pod.status, container)
    done = found.state.terminated if found is not None else None
    return done is not None and done.reason != CONTAINER_STATUS_UNKNOWN


def _container_status(status: PodStatus, name: str) -> ContainerStatus | None:
    """The status of the container of that name, else of the first (Spark runs the first of a template)."""
    statuses = status.container_statuses
    return next((s for s in statuses if s.name == name), statuses[0] if statuses else None)


def _last_words(message: str) -> TerminationMessage | None:
    """The runtime's termination message, when that is what the container left."""
    try:
        return TerminationMessage.model_validate_json(message)
    except ValidationError:
        return None


def _condition(status: PodStatus, kind: str) -> str | None:
    return next((c.status for c in status.conditions if c.type == kind), None)


def executor_ended(pod: Mapping[str, Any]) -> bool:
    """Whether nothing of an executor pod's executor runs any more, on its kubelet's word (as _ended says for
    a driver): it can write no state file, and its pod need not wait out a graceful deletion; False for a pod
    that does not parse."""
    try:
        return _ended(PodView.model_validate(pod), EXECUTOR_CONTAINER)
    except ValidationError:
        return False


def on_lost_node(pod: Mapping[str, Any]) -> bool:
    """Whether a pod (any of ours: a driver, an executor) is on a node the node controller found lost, as the
    module docstring says; False for a pod that does not parse."""
    try:
        return _on_lost_node(PodView.model_validate(pod).status)
    except ValidationError:
        return False


def _on_lost_node(status: PodStatus) -> bool:
    """Ready=False while every container still reports ready (the module docstring says why)."""
    statuses = status.container_statuses
    return _condition(status, "Ready") == "False" and bool(statuses) and all(s.ready for s in statuses)


def _savepoint(raw: str) -> SavepointReport | None:
    if not raw:
        return None
    try:
        answer = SavepointAnswer.model_validate_json(raw)
    except ValidationError as error:
        return SavepointReport(
            id="", error=_bounded(f"unreadable savepoint answer {raw!r}: {_problems(error)}")
        )
    if len(answer.id) > MAX_DRIVER_TEXT or len(answer.location) > MAX_DRIVER_TEXT:
        return SavepointReport(
            id="", error=f"a savepoint answer with an id or location over {MAX_DRIVER_TEXT} characters"
        )
    # The status holds one batch per savepoint: the lowest of its queries'.
    batch_id = min(answer.batches.values(), default=0)
    return SavepointReport(answer.id, answer.location, batch_id, _bounded(answer.error))


def _refused(annotations: Mapping[str, str]) -> bool:
    """The driver refused the control request now on its pod (one written with a deposed leader's term)."""
    request, raw = annotations.get(CONTROL_ANNOTATION, ""), annotations.get(CONTROL_REFUSED_ANNOTATION, "")
    if not (request and raw):  # the usual pod: nothing to parse on every observation
        return False
    try:
        return RefusedRequest.model_validate_json(raw).request == request
    except ValidationError:
        return False


def _refused_promotion(annotations: Mapping[str, str]) -> RefusedPromotion | None:
    """The refused request, if it is a promotion: the batch it named."""
    request = ControlRequest.parse(annotations.get(CONTROL_ANNOTATION, ""))
    if request is None or request.action != "promote":
        return None
    batch = request.argument
    return RefusedPromotion(int(batch) if batch.isascii() and batch.isdigit() else None)


def _rollbacks(raw: str) -> tuple[str, ...]:
    if not raw:
        return ()
    try:
        rollbacks = _ROLLBACKS.validate_json(raw)
    except ValidationError:
        return (_bounded(f"unreadable rollback report {raw!r}"),)
    return tuple(_bounded(rollback) for rollback in rollbacks[-MAX_ROLLBACKS:])


def _problems(error: ValidationError) -> str:
    """One line (it ends up in an Event), not pydantic's multi-line report."""
    problems = error.errors(include_url=False)
    return "; ".join(
        f"{'.'.join(map(str, p['loc']))}: {p['msg']}" if p["loc"] else p["msg"] for p in problems
    )


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_DRIVER_TEXT else f"{text[: MAX_DRIVER_TEXT - 1]}…"
