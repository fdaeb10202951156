"""`ftspark` (also `kubectl ftspark`): look at and steer jobs the GitOps-friendly way.

Every command changes only what a user owns (spec.desiredState, spec.savepoints.onStop or
spec.savepointTriggerNonce), so a Git copy of the manifest stays the truth: commit the same change there, or
Argo CD will set it back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any, assert_never, get_args

from kubernetes import client, config
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s import server_message
from ftspark.adapters.k8s.driver_logs import TAIL_BYTES, read_kept
from ftspark.domain.lifecycle.timing import summary
from ftspark.domain.models import DesiredState, RecoveryPhases
from ftspark.domain.remedies import remedy_for
from ftspark.protocol import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    SPARK_EXEC_ID_LABEL,
    UI_PORT,
    driver_pod_name,
    executor_selector,
    spark_app_id,
    ui_service_name,
)


def _verb(state: DesiredState) -> str:
    """The command that sets state: every desired state has one."""
    match state:
        case "stopped":
            return "stop"
        case "cancelled":
            return "cancel"
        case "suspended":
            return "suspend"
        case "running":
            return "resume"
        case _:
            assert_never(state)


_STATES: dict[str, DesiredState] = {_verb(state): state for state in get_args(DesiredState)}
_STOPS: frozenset[DesiredState] = frozenset({"stopped", "suspended"})  # the ones savepoints.onStop applies to


class CliError(Exception):
    """What went wrong, in the one line the user is shown (no traceback)."""


def _api(args: argparse.Namespace) -> client.CustomObjectsApi:
    try:
        config.load_kube_config(config_file=args.kubeconfig, context=args.context)
    except (config.ConfigException, FileNotFoundError) as outside:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            where = "set KUBECONFIG or --kubeconfig; in a pod, its ServiceAccount"
            raise CliError(f"no cluster to talk to: {outside} ({where})") from None
    return client.CustomObjectsApi()


def _refusal(error: client.ApiException, namespace: str, name: str) -> CliError:
    """The API server's answer as one line: its own message, and what a user most likely needs."""
    said = server_message(error)
    match error.status:
        case 404:
            return CliError(
                f"no FaultTolerantSparkJob {name} in namespace {namespace} (another one: -n NAMESPACE)"
            )
        case 401:
            return CliError(f"the API server does not know you ({said}): check your kubeconfig's credentials")
        case 403:
            return CliError(f"forbidden: {said}")
        case _:
            return CliError(f"{namespace}/{name}: {error.status} {said}")


def _namespace(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    try:
        _, active = config.list_kube_config_contexts(config_file=args.kubeconfig)
        return str(active["context"].get("namespace", "default"))
    except (config.ConfigException, FileNotFoundError):
        return "default"


def _status_lines(job: dict[str, Any]) -> list[str]:
    status = job.get("status") or {}
    spec = job["spec"]
    lines = [
        f"job:            {job['metadata']['namespace']}/{job['metadata']['name']}",
        f"desired state:  {spec.get('desiredState', 'running')}",
        f"phase:          {status.get('phase', '(not reconciled yet)')}",
        f"attempt:        {status.get('attempt', 0)}",
    ]
    if checkpoint := status.get("latestCheckpoint"):
        batch = f", Spark batch {checkpoint['batchId']}" if "batchId" in checkpoint else ""
        lines.append(
            f"checkpoint:     id {checkpoint['id']}{batch} at {checkpoint['time']} ({checkpoint['location']})"
        )
    if failure := status.get("lastFailure"):
        lines.append(f"last failure:   {failure['reason']}: {failure.get('message', '')}")
    for failed in status.get("failures", []):
        code = failed.get("exitCode")
        ended = f"{failed['time']}" + ("" if code is None else f", exit {code}")
        recovered = failed.get("recoverySeconds")
        after = "" if recovered is None else f", the next batch {recovered} s later"
        lines.append(f"failed:         attempt {failed['attempt']} ({ended}{after}) {failed['reason']}")
    if phases := _recovery_phases(status.get("lastFailure")):
        lines.append(f"last recovery:  {summary(phases)}")
    for condition in status.get("conditions", []):
        reason = f"{condition['reason']}: {condition.get('message', '')}"
        lines.append(f"{condition['type']:<15} {condition['status']} {reason}")
    for savepoint in status.get("savepoints", [])[-3:]:
        lines.append(
            f"savepoint:      {savepoint['id']} batch {savepoint['batchId']} {savepoint['location']}"
        )
    if found := remedy_for(status):
        reason, remedy = found
        lines.append(f"what to do:     {reason}: {remedy.fix} (docs/troubleshooting.md)")
    return lines


MAX_EVENTS = 10


def _recovery_phases(failure: Any) -> RecoveryPhases | None:
    """The last failure's recovery as the status says it; None before it ended, or if it does not read."""
    if not isinstance(failure, dict) or "recoveryPhases" not in failure:
        return None
    try:
        return RecoveryPhases.model_validate(failure["recoveryPhases"])
    except ValidationError:
        return None


def _event_lines(namespace: str, job: dict[str, Any]) -> list[str]:
    """The job's own latest Events (by uid: Events outlive a deleted job of the same name), newest last."""
    metadata = job["metadata"]
    selector = f"involvedObject.name={metadata['name']},involvedObject.uid={metadata['uid']}"
    events = client.CoreV1Api().list_namespaced_event(namespace, field_selector=selector).items

    def when(event: Any) -> Any:
        return event.last_timestamp or event.event_time or event.metadata.creation_timestamp

    def order(event: Any) -> tuple[Any, int]:
        # Timestamps have seconds; the resourceVersion orders writes within one (an update moves it too).
        version = event.metadata.resource_version or "0"
        return when(event), int(version) if version.isdigit() else 0

    latest = sorted(events, key=order)[-MAX_EVENTS:]
    if not latest:
        return ["  (none)"]
    return [
        f"  {when(e):%Y-%m-%d %H:%M:%S} {e.type:<7} {e.reason}: {e.message}"
        + (f" (x{e.count})" if (e.count or 1) > 1 else "")
        for e in latest
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ftspark", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("-n", "--namespace")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="phase, attempt, checkpoint, conditions").add_argument("job")
    commands.add_parser("describe", help="the status, the job's latest Events, what to do").add_argument(
        "job"
    )
    for verb, state in _STATES.items():
        command = commands.add_parser(verb, help=f"set desiredState: {state}")
        command.add_argument("job")
        if state in _STOPS:
            command.add_argument(
                "--savepoint",
                action=argparse.BooleanOptionalAction,
                help="end with a savepoint of the final batch (sets savepoints.onStop; default: as it is)",
            )
    commands.add_parser("savepoint", help="take a savepoint (bumps savepointTriggerNonce)").add_argument(
        "job"
    )
    logs = commands.add_parser("logs", help="a driver's log: its pod's, or as kept when the pod ended")
    logs.add_argument("job")
    logs.add_argument("--attempt", type=int, help="which attempt's (default: the job's current one)")
    logs.add_argument(
        "--executor",
        metavar="ID",
        nargs="?",
        const="",
        help="an executor's log instead, while its pod is there (without ID: which executors there are)",
    )
    ui = commands.add_parser(
        "ui", help="the job's Spark UI, forwarded to this machine (kubectl port-forward)"
    )
    ui.add_argument("job")
    ui.add_argument("--port", type=int, default=UI_PORT, help=f"the local port (default {UI_PORT})")
    ui.add_argument("--print-only", action="store_true", help="say where the UI is, forward nothing")
    args = parser.parse_args(argv)
    namespace = _namespace(args)
    try:
        print(_run(args, _api(args), namespace), flush=True)
        if args.command == "ui" and not args.print_only:
            _forward_ui(args, namespace)
    except client.ApiException as error:
        print(f"ftspark: {_refusal(error, namespace, args.job)}", file=sys.stderr)
        return 1
    except HTTPError as error:  # no answer at all: the address, a proxy, a VPN
        host = client.Configuration.get_default_copy().host
        print(f"ftspark: cannot reach the API server at {host}: {error}", file=sys.stderr)
        return 1
    except CliError as error:
        print(f"ftspark: {error}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace, api: client.CustomObjectsApi, namespace: str) -> str:
    """The command's work; what it prints."""
    job = api.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, args.job)
    if args.command == "status":
        return "\n".join(_status_lines(job))
    if args.command == "describe":
        logs = _kept_logs_line(client.CoreV1Api(api.api_client), namespace, job)
        return "\n".join([*_status_lines(job), logs, "events (newest last):", *_event_lines(namespace, job)])
    if args.command == "logs":
        core = client.CoreV1Api(api.api_client)
        attempt = _attempt(job, args.attempt)
        if args.executor is not None:
            return _executor_log(core, job, attempt, args.executor)
        return _driver_log(core, job, attempt)
    if args.command == "ui":
        return _ui_lines(job, namespace, args)
    if args.command == "savepoint":
        nonce = bump_savepoint_nonce(api, namespace, args.job, job)
        done = f"savepoint requested (savepointTriggerNonce: {nonce})"
    else:
        state = _STATES[args.command]
        spec: dict[str, Any] = {"desiredState": state}
        done = f"desiredState: {state}"
        if getattr(args, "savepoint", None) is not None:
            spec["savepoints"] = {"onStop": args.savepoint}
            done += f", savepoints.onStop: {str(args.savepoint).lower()}"
        patch = {"spec": spec}
        api.patch_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, args.job, patch)
    return f"{namespace}/{args.job}: {done}. Commit the same change to Git if Argo CD manages this job."


def _ui_lines(job: dict[str, Any], namespace: str, args: argparse.Namespace) -> str:
    name = job["metadata"]["name"]
    if not ((job.get("spec") or {}).get("ui") or {}).get("enabled"):
        raise CliError(f"{namespace}/{name} runs without its Spark UI: set spec.ui.enabled: true (a restart)")
    url = (job.get("status") or {}).get("uiUrl") or "(not yet in the status)"
    lines = [f"{namespace}/{name}: Spark UI at {url}"]
    if not args.print_only:
        service = ui_service_name(name)
        lines.append(f"forwarding http://localhost:{args.port} to service {service} (Ctrl-C ends it)")
    return "\n".join(lines)


def _forward_ui(args: argparse.Namespace, namespace: str) -> None:
    """Hands over to `kubectl port-forward` of the job's UI Service (it follows the current driver)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise CliError("kubectl is not on PATH: the forward is kubectl's port-forward")
    where = [f"--{flag}={value}" for flag in ("kubeconfig", "context") if (value := getattr(args, flag))]
    service = f"svc/{ui_service_name(args.job)}"
    os.execv(kubectl, [kubectl, *where, "-n", namespace, "port-forward", service, f"{args.port}:{UI_PORT}"])


def _kept_logs_line(core: client.CoreV1Api, namespace: str, job: dict[str, Any]) -> str:
    name = job["metadata"]["name"]
    try:
        kept = read_kept(core, namespace, name, job["metadata"]["uid"])
    except client.ApiException as error:
        return f"kept logs:      not readable here ({server_message(error)})"
    attempts = ", ".join(str(attempt) for attempt in sorted(kept))
    return (
        f"kept logs:      attempts {attempts} (ftspark logs {name} --attempt N)"
        if kept
        else "kept logs:      none"
    )


def _attempt(job: dict[str, Any], asked: int | None) -> int:
    """The attempt asked for, else the job's current one."""
    attempt = asked or int((job.get("status") or {}).get("attempt") or 0)
    if attempt < 1:
        meta = job["metadata"]
        raise CliError(f"{meta['namespace']}/{meta['name']} has not started an attempt yet")
    return attempt


def _executor_log(core: client.CoreV1Api, job: dict[str, Any], attempt: int, executor: str) -> str:
    """An executor's log from its pod. Not kept when the pod ends (Spark deletes it; the driver's log has
    a failed task's error); without an id, which executors the attempt has now."""
    meta = job["metadata"]
    selector = executor_selector(spark_app_id(meta["uid"], attempt))
    pods = core.list_namespaced_pod(meta["namespace"], label_selector=selector).items
    ids = {pod.metadata.labels.get(SPARK_EXEC_ID_LABEL, "?"): pod.metadata.name for pod in pods}
    there = ", ".join(sorted(ids, key=lambda found: (len(found), found))) or "none"
    if not executor:
        return f"attempt {attempt}'s executors now: {there} (ftspark logs {meta['name']} --executor ID)"
    if executor not in ids:
        raise CliError(
            f"executor {executor} of attempt {attempt} has no pod; its executors now: {there} (an executor's "
            f"log goes with its pod; the driver's log has a failed task's error: ftspark logs {meta['name']} "
            f"--attempt {attempt})"
        )
    log: str = core.read_namespaced_pod_log(ids[executor], meta["namespace"], container=EXECUTOR_CONTAINER)
    return log


def _driver_log(core: client.CoreV1Api, job: dict[str, Any], attempt: int) -> str:
    """The attempt's driver log from its pod while there is one, else as the operator kept it when the pod
    ended (the end of it, spec.failureHistory attempts' worth)."""
    name, uid, namespace = job["metadata"]["name"], job["metadata"]["uid"], job["metadata"]["namespace"]
    pod = driver_pod_name(name, attempt)
    try:
        log: str = core.read_namespaced_pod_log(pod, namespace, container=DRIVER_CONTAINER)
        return log
    except client.ApiException as error:
        if error.status not in {400, 404}:  # 400: its container has not started, or is gone with its node
            raise
        live = server_message(error)
    kept = read_kept(core, namespace, name, uid)
    if attempt not in kept:
        held = ", ".join(str(a) for a in sorted(kept)) or "none"
        raise CliError(
            f"attempt {attempt}'s driver log is not there: {live}; and not among those kept when their pods "
            f"ended (attempts: {held}; spec.failureHistory says how many are kept)"
        )
    note = f"pod {pod} is gone; the end of its log (at most {TAIL_BYTES // 1000} kB), kept when it ended"
    print(f"ftspark: {note}", file=sys.stderr)
    return kept[attempt]


def bump_savepoint_nonce(api: client.CustomObjectsApi, namespace: str, name: str, job: dict[str, Any]) -> int:
    """Read-modify-write guarded by resourceVersion: two requests at once make two savepoints, not one."""
    while True:
        nonce = int(job["spec"].get("savepointTriggerNonce") or 0) + 1
        patch = {
            "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
            "spec": {"savepointTriggerNonce": nonce},
        }
        try:
            api.patch_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, name, patch)
            return nonce
        except client.ApiException as error:
            if error.status != 409:
                raise
        job = api.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, name)


if __name__ == "__main__":
    sys.exit(main())
