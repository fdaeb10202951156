"""One pod on a process-backed node: its containers as local processes, its status as a kubelet reports it.

A container is `setpriv --pdeathsig KILL -- unshare --mount --uts --propagation private -- /bin/sh -c
<script>`, where the script sets the pod's hostname, bind-mounts the pod's volumes (and a generated
/etc/hosts) at their mountPath inside the private mount namespace, remounts the machine's root read-only there
when the container asks for readOnlyRootFilesystem (all but the machine's /tmp: MACHINE_TMP says why) and
then execs the container's entrypoint (images.py). So the process sees its volumes where the pod spec says,
the host's view stays as it was, the process dies with the thread that started it (PR_SET_PDEATHSIG), and it
leads its own process group. Every process of the container carries
FTSPARK_CONTAINER=<agent pid>/<node>/<pod uid>/<container> in its environment, which is how a kill finds
descendants that left the process group (pyspark's daemon does).

A pod has no network of its own: its address is its node's, as with hostNetwork. So Spark takes the executors
on one node for one host; what that must not lead to is in docs/concepts.md, "Dynamic allocation" (shuffle
reads).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark.protocol import RuntimeEnv
from ftspark_dev.nodes import images, volumes

log = logging.getLogger(__name__)
Manifest = dict[str, Any]

MARKER = "FTSPARK_CONTAINER"
_SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
_UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
_DEFAULT_TERMINATION_PATH = "/dev/termination-log"
_MESSAGE_LIMIT = 4096  # kubelet's per-container limit
_FALLBACK_LINES, _FALLBACK_BYTES = 80, 2048  # FallbackToLogsOnError, as the kubelet takes it
_POLL = 0.05
_REAP_SECONDS = 10.0  # SIGKILLed processes are gone in milliseconds; this only bounds a stuck kernel
# Pods here share the machine's filesystem, and the machine's /tmp holds the agent's nodes, the tests' files
# and other agents': a volume at /tmp would hide them, so it becomes the container's TMPDIR and java.io.tmpdir
# instead, and the machine's /tmp stays writable under a read-only root.
MACHINE_TMP = Path("/tmp")


# The API server cannot be reached (down, restarting): a kubelet keeps its pods running and reports later.
API_UNREACHABLE = (urllib3.exceptions.HTTPError, OSError)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(api: client.ApiClient, path: str, body: Manifest) -> None:
    """A JSON merge patch: lists are replaced whole, which is what a full status report needs (a strategic
    merge would keep a container's old `running` beside its new `terminated`)."""
    api.call_api(
        path,
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )


def marked_pids(prefix: str) -> list[int]:
    """Every process whose FTSPARK_CONTAINER starts with prefix."""
    needle = f"{MARKER}={prefix}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if any(var.startswith(needle) for var in environ.read().split(b"\0")):
                    found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile
    return found


def signal_marked(prefix: str, sig: signal.Signals) -> int:
    """Send sig to every process whose FTSPARK_CONTAINER starts with prefix; returns how many there were."""
    count = 0
    for pid in marked_pids(prefix):
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, sig)
            count += 1
    return count


@dataclass
class NodeView:
    """What a pod needs from the node it runs on."""

    name: str
    ip: str
    root: Path
    api: client.ApiClient
    api_host: str
    api_port: int
    marker: str  # <agent pid>/<node>/
    mountpoints: volumes.HostMountpoints
    alive: Callable[[int], bool]  # is the node still in this epoch (not killed or restarted since)?

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)


@dataclass
class Container:
    spec: Manifest
    restart_count: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_at: str | None = None
    state: Manifest = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: Manifest = field(default_factory=dict)
    restart_at: float | None = None
    log_path: Path | None = None
    termination_path: Path | None = None
    held_mountpoints: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def terminated(self) -> Manifest | None:
        value: Manifest | None = self.state.get("terminated")
        return value


class PodRunner(threading.Thread):
    """Runs one pod from its first sight on the node to its deletion (or its node's death)."""

    def __init__(
        self,
        node: NodeView,
        pod: Manifest,
        epoch: int,
        restart_counts: dict[str, int] | None = None,
        lost: bool = False,
    ):
        metadata = pod["metadata"]
        super().__init__(name=f"pod-{metadata['namespace']}/{metadata['name']}", daemon=True)
        self.node = node
        self.pod = pod
        self.epoch = epoch
        self.uid: str = metadata["uid"]
        self.key = f"{metadata['namespace']}_{metadata['name']}_{self.uid}"
        self.pod_dir = node.root / "pods" / self.key
        self.log_dir = node.root / "logs" / self.key
        spec = pod["spec"]
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.init_containers = [Container(c) for c in spec.get("initContainers") or []]
        self.containers = [Container(c, (restart_counts or {}).get(c["name"], 0)) for c in spec["containers"]]
        self.done = threading.Event()  # the pod reached a final phase (or its node died)
        self._delete_grace: int | None = None
        self._wake = threading.Event()
        self._conditions: dict[str, tuple[str, str]] = {}
        self._start_time = now()
        self._phase = "Pending"
        self._message: str | None = None
        self._reported: Manifest | None = None
        self._mounts: dict[str, Path] = {}
        self._lost = lost

    # -- requests from the node (any thread) ---------------------------------------------------------------

    def request_delete(self, grace: int) -> None:
        """deletionTimestamp is set: stop the containers within grace seconds, then remove the pod object."""
        self._delete_grace = grace if self._delete_grace is None else min(grace, self._delete_grace)
        self._wake.set()

    def has_processes(self) -> bool:
        containers = self.init_containers + self.containers
        return any(c.process is not None and c.process.poll() is None for c in containers)

    def kill(self) -> None:
        """A crash: SIGKILL every process of the pod, as the OOM killer or a `kill -9` would."""
        signal_marked(f"{self.node.marker}{self.uid}/", signal.SIGKILL)

    # -- the pod's life ------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:
            log.exception("pod %s failed in the node agent", self.key)
            # Surface the agent's own bug on the pod rather than leaving it Pending.
            self._phase, self._message = "Failed", f"node agent error: {error!r}"
            with contextlib.suppress(Exception):
                self._report()
        finally:
            self.kill()
            for container in self.init_containers + self.containers:
                self._reap(container)
                self.node.mountpoints.release(container.held_mountpoints)
                container.held_mountpoints = []
            self.done.set()

    def _alive(self) -> bool:
        return self.node.alive(self.epoch)

    def _run(self) -> None:
        if self._lost:
            self._report_lost()
            return self._after_end()
        self._set_condition("PodScheduled", "True")
        for condition in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
            self._set_condition(condition, "False")
        self._report()
        if not self._prepare_volumes():
            return self._finish_deletion()
        self._set_condition("PodReadyToStartContainers", "True")
        if not self._run_init_containers():
            return self._after_end()
        self._set_condition("Initialized", "True")
        for container in self.containers:
            self._start(container)
        self._phase = "Running"
        self._report()
        while self._alive():
            if self._delete_grace is not None:
                self._terminate(self._delete_grace)
                return self._finish_deletion()
            for container in self.containers:
                self._step(container)
            if all(c.terminated and c.restart_at is None for c in self.containers):
                break
            self._report()
            self._wake.wait(_POLL)
        self._after_end()

    def _after_end(self) -> None:
        if not self._alive():
            return  # the node died: nobody reports for it
        self._report()
        while self._alive() and self._delete_grace is None:
            self._wake.wait(1.0)
            self._report()  # a no-op once reported; retries one the API server missed
        self._finish_deletion()

    def _prepare_volumes(self) -> bool:
        self.pod_dir.mkdir(parents=True, exist_ok=True)
        while self._alive() and self._delete_grace is None:
            try:
                self._mounts = volumes.materialize(
                    self.node.core, self.pod, self.pod_dir, self.node.root / "host", self.node.ip
                )
                (self.pod_dir / "etc-hosts").write_text(
                    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                    f"{self.node.ip}\t{self._hostname()}\n"
                )
                return True
            except volumes.VolumeNotReadyError as error:
                self._message = str(error)
                self._report()
                self._wake.wait(1.0)
            except API_UNREACHABLE:  # a configMap, secret or token to fetch: wait for the API server
                self._wake.wait(1.0)
        return False

    def _run_init_containers(self) -> bool:
        for container in self.init_containers:
            while self._alive():
                self._start(container)
                while self._alive() and container.process is not None and self._delete_grace is None:
                    self._step(container)
                    if container.terminated:
                        break
                    self._wake.wait(_POLL)
                if self._delete_grace is not None or not self._alive():
                    return False
                terminated = container.terminated or {}
                if terminated.get("exitCode") == 0:
                    break
                if self.restart_policy == "Never":
                    self._phase = "Failed"
                    return False
                container.restart_count += 1
                self._report()
        return self._alive()

    # -- containers ----------------------------------------------------------------------------------------

    def _hostname(self) -> str:
        return str(self.pod["spec"].get("hostname") or self.pod["metadata"]["name"])[:63]

    def _env(self, spec: Manifest) -> dict[str, str]:
        metadata = self.pod["metadata"]
        namespace = metadata["namespace"]
        core = self.node.core
        env = images.image_env(spec["image"])
        host, port = self.node.api_host, str(self.node.api_port)
        env.update(
            {
                "HOSTNAME": self._hostname(),
                "KUBERNETES_SERVICE_HOST": host,
                "KUBERNETES_SERVICE_PORT": port,
                "KUBERNETES_SERVICE_PORT_HTTPS": port,
                "KUBERNETES_PORT": f"tcp://{host}:{port}",
            }
        )
        for source in spec.get("envFrom") or []:
            kind = "configMap" if "configMapRef" in source else "secret"
            values = volumes.object_env(core, kind, namespace, source[f"{kind}Ref"])
            env.update({source.get("prefix", "") + k: v for k, v in values.items()})
        for variable in spec.get("env") or []:
            value_from = variable.get("valueFrom")
            if value_from is None:
                env[variable["name"]] = images.expand(variable.get("value", ""), env)
            elif "fieldRef" in value_from:
                env[variable["name"]] = volumes.field_value(
                    self.pod, value_from["fieldRef"]["fieldPath"], self.node.ip
                )
            elif "configMapKeyRef" in value_from or "secretKeyRef" in value_from:
                kind = "configMap" if "configMapKeyRef" in value_from else "secret"
                value = volumes.key_ref(core, kind, namespace, value_from[f"{kind}KeyRef"])
                if value is not None:
                    env[variable["name"]] = value
            else:
                raise ValueError(f"env {variable['name']}: resourceFieldRef is not supported here")
        return env

    def _mount_table(self, container: Container) -> list[tuple[Path, str, bool]]:
        table = [(self.pod_dir / "etc-hosts", "/etc/hosts", False)]
        for mount in container.spec.get("volumeMounts") or []:
            source = self._mount_source(mount)
            if Path(mount["mountPath"]) != MACHINE_TMP:
                table.append((source, mount["mountPath"], bool(mount.get("readOnly"))))
        path = container.spec.get("terminationMessagePath", _DEFAULT_TERMINATION_PATH)
        if path != _DEFAULT_TERMINATION_PATH and container.termination_path is not None:
            table.append((container.termination_path, path, False))
        return sorted(table, key=lambda entry: len(Path(entry[1]).parts))

    def _mount_source(self, mount: Manifest) -> Path:
        source = self._mounts[mount["name"]]
        if mount.get("subPath"):
            source = source / mount["subPath"]
            if not source.exists():
                source.mkdir(parents=True)
        return source

    def _tmp_env(self, spec: Manifest) -> dict[str, str]:
        """A volume at /tmp, as Python and JVMs see it: TMPDIR and java.io.tmpdir (see the module's doc)."""
        for mount in spec.get("volumeMounts") or []:
            if Path(mount["mountPath"]) == MACHINE_TMP:
                tmp = str(self._mount_source(mount))
                return {"TMPDIR": tmp, "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp}"}
        return {}

    def _start(self, container: Container) -> None:
        spec = container.spec
        directory = self.pod_dir / "containers" / container.name
        work = directory / "work"
        work.mkdir(parents=True, exist_ok=True)
        container.termination_path = directory / "termination-log"
        container.termination_path.write_bytes(b"")
        container.log_path = self.log_dir / container.name / f"{container.restart_count}.log"
        container.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            env = self._env(spec)
        except volumes.VolumeNotReadyError as error:
            container.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(error)}}
            container.restart_at = time.monotonic() + 1.0
            return
        env |= self._tmp_env(spec)
        env[RuntimeEnv.TERMINATION_LOG] = str(container.termination_path)
        env[MARKER] = f"{self.node.marker}{self.uid}/{container.name}"
        working_dir = spec.get("workingDir")
        cwd = working_dir or str(work)
        argv = images.container_argv(
            spec["image"], spec.get("command") or [], spec.get("args") or [], env, cwd
        )
        script = ["set -e", f"/usr/bin/hostname {shlex.quote(self._hostname())}"]
        self.node.mountpoints.release(container.held_mountpoints)
        container.held_mountpoints = []
        for source, target, read_only in self._mount_table(container):
            container.held_mountpoints += self.node.mountpoints.ensure(Path(target), source.is_file())
            script.append(f"/usr/bin/mount --bind {shlex.quote(str(source))} {shlex.quote(target)}")
            if read_only:
                script.append(f"/usr/bin/mount -o remount,bind,ro {shlex.quote(target)}")
        if working_dir:
            container.held_mountpoints += self.node.mountpoints.ensure(Path(working_dir), False)
        if (spec.get("securityContext") or {}).get("readOnlyRootFilesystem"):
            # The machine's root, read-only in this mount namespace only; volumes, already mounted, stay as
            # they are, and so does the machine's /tmp (see the module's doc).
            tmp = shlex.quote(str(MACHINE_TMP))
            script += [f"/usr/bin/mount --rbind {tmp} {tmp}", "/usr/bin/mount -o remount,bind,ro /"]
        script += [f"cd {shlex.quote(cwd)}", 'exec "$@"']
        with container.log_path.open("ab") as log_file:
            container.process = subprocess.Popen(
                [
                    *(_SETPRIV, "--pdeathsig", "KILL", "--"),
                    *(_UNSHARE, "--mount", "--uts", "--propagation", "private", "--"),
                    *("/bin/sh", "-c", "\n".join(script), "ftspark-container", *argv),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        container.started_at = now()
        container.restart_at = None
        container.state = {"running": {"startedAt": container.started_at}}

    def _step(self, container: Container) -> None:
        """Notice an exit; restart per restartPolicy when its back-off has passed."""
        if container.restart_at is not None and time.monotonic() >= container.restart_at:
            container.restart_count += 1
            self._start(container)
            return
        process = container.process
        if process is None or not container.running:
            return
        code = process.poll()
        if code is None:
            return
        self._end_the_rest(container)
        self._record_exit(container, code)
        restart = self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)
        if restart and container in self.containers:
            # Back-off 1 s, doubling to 30 s (a kubelet starts at 10 s and caps at 5 min).
            delay = min(30.0, 2.0 ** min(container.restart_count, 5))
            container.last_state = {"terminated": container.state["terminated"]}
            container.state = {"waiting": {"reason": "CrashLoopBackOff"}}
            container.restart_at = time.monotonic() + delay

    def _end_the_rest(self, container: Container) -> None:
        """A container ends with its main process: runc gives it a PID namespace of its own, whose init's
        death kills every other process in it before the runtime reports the exit. So a terminated container
        means nothing of it runs any more (the operator fences and goes on that word), here too."""
        prefix = f"{self.node.marker}{self.uid}/{container.name}"
        deadline = time.monotonic() + _REAP_SECONDS
        while signal_marked(prefix, signal.SIGKILL):
            if time.monotonic() > deadline:  # stuck in the kernel: say so rather than hang the pod
                log.error("%s: processes of container %s outlived their SIGKILL", self.key, container.name)
                return
            time.sleep(_POLL)

    def _record_exit(self, container: Container, code: int) -> None:
        exit_code = (
            128 - code if code < 0 else code
        )  # killed by signal n: 128 + n, as a container runtime says
        terminated: Manifest = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": container.started_at,
            "finishedAt": now(),
            "containerID": self._container_id(container),
        }
        message = self._termination_message(container, exit_code)
        if message:
            terminated["message"] = message
        container.state = {"terminated": terminated}

    def _termination_message(self, container: Container, exit_code: int) -> str:
        message = b""
        if container.termination_path is not None and container.termination_path.exists():
            message = container.termination_path.read_bytes()[:_MESSAGE_LIMIT]
        fallback = container.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        if not message and fallback and exit_code != 0 and container.log_path is not None:
            lines = container.log_path.read_bytes().splitlines()[-_FALLBACK_LINES:]
            message = b"\n".join(lines)[-_FALLBACK_BYTES:]
        return message.decode(errors="replace")

    def _container_id(self, container: Container) -> str:
        pid = container.process.pid if container.process else 0
        return f"ftspark://{self.node.name}/{pid}"

    def _reap(self, container: Container) -> None:
        if container.process is not None and container.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(container.process.pid, signal.SIGKILL)
            container.process.wait()

    def _terminate(self, grace: int) -> None:
        """SIGTERM, up to grace seconds, then SIGKILL — for every container still running."""
        running = [c for c in self.init_containers + self.containers if c.running and c.process is not None]
        for container in running:
            assert container.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(container.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(c.process and c.process.poll() is None for c in running):
            time.sleep(_POLL)
        for container in running:
            signal_marked(f"{self.node.marker}{self.uid}/{container.name}", signal.SIGKILL)
            self._reap(container)
            assert container.process is not None
            self._record_exit(container, container.process.returncode)
        for container in self.containers:
            container.restart_at = None

    def _finish_deletion(self) -> None:
        """As a kubelet finalizes: report the final status, then delete the object with grace 0."""
        if not self._alive():
            return
        metadata = self.pod["metadata"]
        while self._alive():
            self._report()
            try:
                self.node.core.delete_namespaced_pod(
                    metadata["name"],
                    metadata["namespace"],
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=self.uid)
                    ),
                )
            except ApiException:
                pass  # gone already, or another uid: nothing of ours to delete
            except API_UNREACHABLE:
                self._wake.wait(1.0)
                continue
            break
        shutil.rmtree(self.pod_dir, ignore_errors=True)

    # -- status --------------------------------------------------------------------------------------------

    def _set_condition(self, kind: str, status: str) -> None:
        current = self._conditions.get(kind)
        if current is None or current[0] != status:
            self._conditions[kind] = (status, now())

    def _container_status(self, container: Container) -> Manifest:
        status: Manifest = {
            "name": container.name,
            "image": container.spec["image"],
            "imageID": f"ftspark-local://{container.spec['image']}",
            "ready": container.running,
            "started": container.running,
            "restartCount": container.restart_count,
            "state": container.state,
            "lastState": container.last_state,
        }
        if container.process is not None:
            status["containerID"] = self._container_id(container)
        return status

    def _compute_phase(self) -> str:
        if self._phase in {"Pending", "Failed"}:
            return self._phase
        finals = [c.terminated for c in self.containers]
        if all(final is not None for final in finals) and all(c.restart_at is None for c in self.containers):
            return "Succeeded" if all(f and f["exitCode"] == 0 for f in finals) else "Failed"
        return "Running"

    def _report(self) -> None:
        if not self._alive():
            return
        phase = self._compute_phase()
        ready = "True" if phase == "Running" and all(c.running for c in self.containers) else "False"
        self._set_condition("ContainersReady", ready)
        self._set_condition("Ready", ready)
        status: Manifest = {
            "phase": phase,
            "hostIP": self.node.ip,
            "hostIPs": [{"ip": self.node.ip}],
            "podIP": self.node.ip,
            "podIPs": [{"ip": self.node.ip}],
            "startTime": self._start_time,
            "message": self._message,
            "conditions": [
                {"type": kind, "status": value, "lastTransitionTime": since}
                for kind, (value, since) in self._conditions.items()
            ],
            "containerStatuses": [self._container_status(c) for c in self.containers],
        }
        if self.init_containers:
            status["initContainerStatuses"] = [self._container_status(c) for c in self.init_containers]
        if status == self._reported:
            return
        metadata = self.pod["metadata"]
        try:
            merge_patch(
                self.node.api,
                f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/status",
                {"metadata": {"uid": self.uid}, "status": status},
            )
            self._reported = status
        except ApiException as error:
            if error.status == 404:
                self.request_delete(0)  # force-deleted: nothing may keep running
            else:
                log.warning("status of %s not reported: %s", self.key, error)
        except API_UNREACHABLE as error:
            log.debug("status of %s not reported yet: %s", self.key, error)  # the next report retries

    def _report_lost(self) -> None:
        """A pod whose processes vanished with its node, seen again after the node restarted (restartPolicy
        Never): Failed, as a kubelet reports containers it cannot find."""
        for container in self.containers:
            container.state = {
                "terminated": {
                    "exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the node restarted",
                    "finishedAt": now(),
                }
            }
        self._phase = "Failed"
        self._message = f"node {self.node.name} restarted"
        self._set_condition("PodScheduled", "True")
        self._report()
