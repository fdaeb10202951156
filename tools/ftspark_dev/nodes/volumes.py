"""A pod's volumes as directories under its node's root, and the downward API.

Volumes live in `<node root>/pods/<namespace>_<name>_<uid>/volumes/<volume>/`; hostPath volumes (inline, or a
claim's PersistentVolume) map to `<node root>/host/<path>` (never the machine's own path). Each container
process gets its own mount namespace where these directories are bind-mounted at their mountPath (see
pods.py), so the host's view never changes except for empty mountpoint directories that have to exist on the
host; those are tracked here and removed once no mount namespace uses them.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

Manifest = dict[str, Any]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class VolumeNotReadyError(Exception):
    """A referenced ConfigMap or Secret is missing: a kubelet keeps the pod in ContainerCreating, retrying."""


def field_value(pod: Manifest, path: str, pod_ip: str) -> str:
    """A downward-API fieldRef of the pod (the pod IP is the node's loopback address)."""
    metadata = pod["metadata"]
    simple = {
        "metadata.name": metadata["name"],
        "metadata.namespace": metadata["namespace"],
        "metadata.uid": metadata["uid"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": pod_ip,
        "status.hostIPs": pod_ip,
    }
    if path in simple:
        return str(simple[path])
    for kind in ("labels", "annotations"):
        prefix = f"metadata.{kind}"
        if path == prefix:
            return "\n".join(f'{k}="{v}"' for k, v in sorted((metadata.get(kind) or {}).items()))
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str((metadata.get(kind) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise ValueError(f"unsupported fieldRef {path}")


def _object_data(
    core: client.CoreV1Api, kind: str, namespace: str, name: str, optional: bool
) -> dict[str, bytes]:
    try:
        if kind == "configMap":
            config_map = core.read_namespaced_config_map(name, namespace)
            data = {k: v.encode() for k, v in (config_map.data or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in (config_map.binary_data or {}).items()})
            return data
        secret = core.read_namespaced_secret(name, namespace)
        return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
    except ApiException as error:
        if error.status == 404 and optional:
            return {}
        if error.status == 404:
            raise VolumeNotReadyError(f'{kind} "{name}" not found') from error
        raise


def key_ref(core: client.CoreV1Api, kind: str, namespace: str, ref: Manifest) -> str | None:
    """The value of a configMapKeyRef or secretKeyRef (None when optional and absent)."""
    optional = bool(ref.get("optional"))
    data = _object_data(core, kind, namespace, ref["name"], optional)
    if ref["key"] not in data:
        if optional:
            return None
        raise VolumeNotReadyError(f'key "{ref["key"]}" not in {kind} "{ref["name"]}"')
    return data[ref["key"]].decode()


def object_env(core: client.CoreV1Api, kind: str, namespace: str, ref: Manifest) -> dict[str, str]:
    """envFrom: every key of a ConfigMap or Secret."""
    data = _object_data(core, kind, namespace, ref["name"], bool(ref.get("optional")))
    return {k: v.decode() for k, v in data.items()}


def _write(directory: Path, relative: str, content: bytes, mode: int | None) -> None:
    target = directory / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    target.chmod(mode if mode is not None else 0o644)


def _write_items(directory: Path, data: Mapping[str, bytes], source: Manifest) -> None:
    items = source.get("items")
    default_mode = source.get("defaultMode")
    if items:
        for item in items:
            if item["key"] in data:
                _write(directory, item["path"], data[item["key"]], item.get("mode", default_mode))
            elif not source.get("optional"):
                raise VolumeNotReadyError(f'key "{item["key"]}" not in "{source.get("name")}"')
    else:
        for key, value in data.items():
            _write(directory, key, value, default_mode)


def _service_account_token(core: client.CoreV1Api, pod: Manifest, source: Manifest) -> bytes:
    """A token bound to the pod, through the TokenRequest API, as the kubelet requests it."""
    metadata = pod["metadata"]
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[source["audience"]] if source.get("audience") else [],
            expiration_seconds=source.get("expirationSeconds", 3607),
            bound_object_ref=client.V1BoundObjectReference(
                kind="Pod", api_version="v1", name=metadata["name"], uid=metadata["uid"]
            ),
        )
    )
    account = pod["spec"].get("serviceAccountName") or "default"
    response = core.create_namespaced_service_account_token(account, metadata["namespace"], request)
    return str(response.status.token).encode()


def _downward_items(pod: Manifest, source: Manifest, pod_ip: str) -> dict[str, bytes]:
    files = {}
    for item in source.get("items", []):
        if "fieldRef" in item:
            files[item["path"]] = field_value(pod, item["fieldRef"]["fieldPath"], pod_ip).encode()
    return files


def materialize(
    core: client.CoreV1Api, pod: Manifest, pod_dir: Path, host_root: Path, pod_ip: str
) -> dict[str, Path]:
    """Create every volume of the pod; returns volume name → the directory (or file) that backs it."""
    namespace = pod["metadata"]["namespace"]
    paths: dict[str, Path] = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        directory = pod_dir / "volumes" / name
        if "persistentVolumeClaim" in volume:
            paths[name] = _host_path(_claimed_host_path(core, namespace, volume), host_root)
            continue
        if "hostPath" in volume:
            paths[name] = _host_path(volume["hostPath"], host_root)
            continue
        directory.mkdir(parents=True, exist_ok=True)
        paths[name] = directory
        if "emptyDir" in volume:
            continue
        if "configMap" in volume or "secret" in volume:
            kind = "configMap" if "configMap" in volume else "secret"
            source = volume[kind]
            object_name = source["name"] if kind == "configMap" else source["secretName"]
            data = _object_data(core, kind, namespace, object_name, bool(source.get("optional")))
            _write_items(directory, data, source)
        elif "downwardAPI" in volume:
            for path, content in _downward_items(pod, volume["downwardAPI"], pod_ip).items():
                _write(directory, path, content, volume["downwardAPI"].get("defaultMode"))
        elif "projected" in volume:
            _projected(core, pod, volume["projected"], directory, pod_ip)
        else:
            raise ValueError(
                f"volume {name}: only emptyDir, hostPath, persistentVolumeClaim, configMap, secret, "
                "downwardAPI, projected"
            )
    return paths


def _host_path(source: Manifest, host_root: Path) -> Path:
    target: Path = host_root / str(source["path"]).lstrip("/")
    if source.get("type") == "FileOrCreate":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    elif source.get("type") in (None, "", "DirectoryOrCreate", "Directory"):
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        raise VolumeNotReadyError(f"hostPath {source['path']} does not exist on this node")
    return target


def _claimed_host_path(core: client.CoreV1Api, namespace: str, volume: Manifest) -> Manifest:
    """The hostPath of the PersistentVolume bound to the volume's claim (the only kind these nodes have);
    an unbound claim waits, as on a kubelet."""
    claim_name = volume["persistentVolumeClaim"]["claimName"]
    try:
        claim = core.read_namespaced_persistent_volume_claim(claim_name, namespace)
    except ApiException as error:
        if error.status == 404:
            raise VolumeNotReadyError(f'persistentvolumeclaim "{claim_name}" not found') from error
        raise
    if claim.status is None or claim.status.phase != "Bound":
        raise VolumeNotReadyError(f'persistentvolumeclaim "{claim_name}" is not bound')
    bound = core.read_persistent_volume(claim.spec.volume_name)
    if bound.spec.host_path is None:
        raise ValueError(f"volume {volume['name']}: only hostPath PersistentVolumes on process-backed nodes")
    return {"path": bound.spec.host_path.path, "type": bound.spec.host_path.type}


def _projected(
    core: client.CoreV1Api, pod: Manifest, projected: Manifest, directory: Path, pod_ip: str
) -> None:
    namespace = pod["metadata"]["namespace"]
    mode = projected.get("defaultMode")
    for source in projected.get("sources") or []:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            _write(directory, token["path"], _service_account_token(core, pod, token), mode)
        elif "configMap" in source or "secret" in source:
            kind = "configMap" if "configMap" in source else "secret"
            ref = source[kind]
            data = _object_data(core, kind, namespace, ref["name"], bool(ref.get("optional")))
            _write_items(directory, data, {"defaultMode": mode, **ref})
        elif "downwardAPI" in source:
            for path, content in _downward_items(pod, source["downwardAPI"], pod_ip).items():
                _write(directory, path, content, mode)


class HostMountpoints:
    """Mountpoints that had to be created on the host (a mount needs an existing target).

    Removing a directory that is a mountpoint in another mount namespace would silently unmount it there, so a
    created directory is removed only when no process on the machine has anything mounted at or below it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._created: dict[Path, int] = {}

    def ensure(self, target: Path, is_file: bool) -> list[Path]:
        """Create target (and missing parents); returns what was created, to release later."""
        with self._lock:
            missing = []
            probe = target
            while not os.path.lexists(probe):
                missing.append(probe)
                probe = probe.parent
            for path in reversed(missing):
                if path == target and is_file:
                    path.touch()
                else:
                    path.mkdir()
            # Also hold the ones created earlier for another pod that this target lies in.
            held = missing + [
                path for path in self._created if _is_under(target, path) and path not in missing
            ]
            for path in held:
                self._created[path] = self._created.get(path, 0) + 1
            return held

    def release(self, paths: list[Path]) -> None:
        with self._lock:
            removable = []
            for path in paths:
                self._created[path] -= 1
                if self._created[path] == 0:
                    del self._created[path]
                    removable.append(path)
            if not removable:
                return
            busy = _mounted_paths()
            for path in sorted(removable, key=lambda p: len(p.parts), reverse=True):
                if any(_is_under(mounted, path) for mounted in busy):
                    continue
                try:
                    path.unlink() if path.is_file() else path.rmdir()
                except OSError:
                    continue  # not empty: someone else put something there


def _is_under(path: Path, ancestor: Path) -> bool:
    return path == ancestor or ancestor in path.parents


def _mounted_paths() -> set[Path]:
    """Every mountpoint in every mount namespace on the machine (one process per namespace is read)."""
    seen: set[str] = set()
    mounted: set[Path] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            namespace = os.readlink(f"/proc/{entry.name}/ns/mnt")
            if namespace in seen:
                continue
            seen.add(namespace)
            with open(f"/proc/{entry.name}/mountinfo") as mountinfo:
                for line in mountinfo:
                    mounted.add(Path(line.split()[4]))
        except OSError:
            continue  # the process is gone
    return mounted
