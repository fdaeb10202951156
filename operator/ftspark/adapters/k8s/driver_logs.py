"""The end of each ended driver's log, kept in a ConfigMap of the job's (protocol.driver_logs_name) so that
`ftspark logs` can show it after the pod is gone: a failed attempt's pod is deleted when the next one starts,
a finished job's when its result is recorded.

The operator reads what the kubelet serves (pods/log) just before it deletes the pod, so an OOMKilled or
SIGKILLed driver's log is kept too. A lost node's is not: its kubelet no longer answers. What a driver prints
is the tenant's: the read is bounded (at most READ_LIMIT bytes of the last TAIL_LINES lines) and the kept tail
too (TAIL_BYTES per attempt, so 20 attempts, spec.failureHistory's most, stay under a ConfigMap's 1 MiB).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ftspark import API_GROUP, API_VERSION, KIND
from ftspark.adapters.k8s import request_timeout, server_message
from ftspark.ports.cluster import DriverLogNotKeptError, JobResource
from ftspark.protocol import DRIVER_CONTAINER, JOB_LABEL, driver_logs_name

TAIL_BYTES = 40_000
TAIL_LINES = 500
READ_LIMIT = 1 << 20
_READ_SECONDS = 10.0  # a kubelet that does not answer holds up only this job's reconcile, and only this long
_KEY = re.compile(r"attempt-(\d+)\.log")


def log_key(attempt: int) -> str:
    return f"attempt-{attempt}.log"


def attempt_of(key: str) -> int | None:
    matched = _KEY.fullmatch(key)
    return int(matched.group(1)) if matched else None


def tail(text: str, limit: int = TAIL_BYTES) -> str:
    """The end of text within limit bytes of UTF-8, from the start of a line when one starts in it."""
    data = text.encode()
    if len(data) <= limit:
        return text
    end = data[-limit:]
    newline = end.find(b"\n")
    return end[newline + 1 :].decode(errors="ignore")


def wanted(kept_so_far: Mapping[str, str], attempt: int, kept: int) -> bool:
    """Whether the attempt's log is to be read: not kept yet, and not older than all of the newest `kept`
    (a late pod of an old attempt: its log would go at once, and be read again at every pass)."""
    present = sorted(a for key in kept_so_far if (a := attempt_of(key)) is not None)
    return attempt not in present and (len(present) < kept or attempt > present[-kept])


def newest(kept_so_far: Mapping[str, str], attempt: int, log: str, kept: int) -> dict[str, str]:
    """The logs to keep: those so far and this attempt's, the newest `kept` attempts' only (keys not an
    attempt's log are someone else's edit and go)."""
    logs = {key: text for key, text in kept_so_far.items() if attempt_of(key) is not None}
    logs[log_key(attempt)] = log
    newest_first = sorted(logs, key=lambda key: attempt_of(key) or 0, reverse=True)[:kept]
    return {key: logs[key] for key in sorted(newest_first, key=lambda key: attempt_of(key) or 0)}


def read_kept(core: client.CoreV1Api, namespace: str, job_name: str, job_uid: str) -> dict[int, str]:
    """The kept logs of the job with that uid, by attempt; none when its ConfigMap is missing or is not the
    job's (an object of the same name someone else made)."""
    found = _read(core, namespace, driver_logs_name(job_name))
    if found is None or not _owned_by(found, job_uid):
        return {}
    data: dict[str, str] = found.get("data") or {}
    return {attempt: text for key, text in data.items() if (attempt := attempt_of(key)) is not None}


class KubeDriverLogs:
    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)

    def keep(self, job: JobResource, pod_name: str, attempt: int, kept: int) -> None:
        namespace, name = job.key.namespace, driver_logs_name(job.key.name)
        log: str | None = None
        for _ in range(3):  # a write in between (a deposed leader's, of the same ended log): read again
            try:
                found = _read(self._core, namespace, name)
            except ApiException as error:
                raise _not_kept(
                    attempt, f"{namespace}/{name} could not be read: {server_message(error)}"
                ) from None
            if found is not None and not _owned_by(found, job.uid):
                raise _not_kept(
                    attempt,
                    f"{namespace}/{name} exists and is not this job's (no ownerReference to it); delete or "
                    "rename that ConfigMap",
                )
            data: dict[str, str] = dict((found or {}).get("data") or {})
            if not wanted(data, attempt, kept):
                return
            log = log if log is not None else self._log_tail(namespace, pod_name)
            body = _config_map(job, name, newest(data, attempt, log, kept), found)
            try:
                if found is None:
                    self._core.create_namespaced_config_map(namespace, body)
                else:
                    self._core.replace_namespaced_config_map(name, namespace, body)
                return
            except ApiException as error:
                if error.status != 409:
                    why = f"{namespace}/{name}: the write was refused: {server_message(error)}"
                    raise _not_kept(attempt, why) from None
        raise _not_kept(attempt, f"{namespace}/{name} kept changing")

    def _log_tail(self, namespace: str, pod_name: str) -> str:
        try:
            response = self._core.read_namespaced_pod_log(
                pod_name,
                namespace,
                container=DRIVER_CONTAINER,
                tail_lines=TAIL_LINES,
                limit_bytes=READ_LIMIT,
                _preload_content=False,
                _request_timeout=request_timeout(_READ_SECONDS),
            )
            return tail(bytes(response.data).decode(errors="replace"))
        except ApiException as error:
            said = server_message(error)
        except HTTPError as error:
            said = str(error)
        return f"(ftspark: pod {pod_name}'s log could not be read when it ended: {said})\n"


def _read(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        response = core.read_namespaced_config_map(name, namespace, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    found: dict[str, Any] = json.loads(response.data)
    return found


def _not_kept(attempt: int, why: str) -> DriverLogNotKeptError:
    return DriverLogNotKeptError(f"the driver log of attempt {attempt} is not kept: ConfigMap {why}")


def _owned_by(config_map: Mapping[str, Any], uid: str) -> bool:
    owners = config_map.get("metadata", {}).get("ownerReferences") or []
    return any(owner.get("uid") == uid for owner in owners)


def _config_map(
    job: JobResource, name: str, data: dict[str, str], found: Mapping[str, Any] | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {JOB_LABEL: job.key.name},
        # Deleting the job deletes its kept logs.
        "ownerReferences": [
            {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, "name": job.key.name, "uid": job.uid}
        ],
    }
    if found is not None:  # a replace only of what was read: a write in between is a 409, and read again
        metadata["resourceVersion"] = found["metadata"]["resourceVersion"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
