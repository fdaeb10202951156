"""Real nodes on this machine: per node one containerd (Debian's, with runc) and one kubelet (from kubebin),
a CNI bridge, and for the machine one kube-proxy. Pods are OCI containers; images come from `make images`.

`RealNodes(plane, nodes=N, images=...).start()` joins N nodes to a ControlPlane started with
`address=network.HOST_ADDRESS, service_cidr=network.SERVICE_CIDR`; `kill_node`/`restart_node` inject a node
loss (kubelet, containerd, shims and the node's containers all SIGKILLed); `stop()` undoes everything the run
did to the machine, and so does the next run for a run that was itself SIGKILLed (`sweep_abandoned`).

One real-node installation at a time per machine: they share the fixed network above (a lock says so).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import yaml

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.processes import ManagedProcess, free_port
from ftspark_dev.realnodes import network
from ftspark_dev.realnodes.host import (
    CGROUP_ROOT,
    FIXED_PATHS,
    SYSCTLS,
    cmdlines,
    read_sysctl,
    write_sysctl,
)

STATE_ROOT = Path("/var/tmp")
_WORKDIR_PREFIX = "ftspark-realnodes-"
_LOCK = Path("/run/lock/ftspark-realnodes.lock")
_STATE_FILE = "machine-before.json"  # what teardown restores, also for the sweep of a SIGKILLed run
CNI_BIN_DIR = "/usr/lib/cni"
PAUSE_IMAGE = "ftspark/pause:1.0"
_NODE_READY_TIMEOUT = 60.0
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _v1_hierarchies() -> list[Path]:
    # The empty cgroup2 mount next to the v1 controllers (`unified`) takes no part.
    return [h for h in sorted(CGROUP_ROOT.iterdir()) if h.name != "unified" and h.is_dir()]


def _create_cgroup(name: str) -> None:
    for hierarchy in _v1_hierarchies():
        path = hierarchy / name
        path.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":  # a new cpuset has no CPUs or memory nodes: nothing could run in it
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((hierarchy / knob).read_text())


def _cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for directory, _, files in os.walk(CGROUP_ROOT / "pids" / name):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in Path(directory, "cgroup.procs").read_text().split())
    return pids


def _kill_cgroup(name: str, timeout: float = 30.0) -> None:
    """SIGKILL every process of the cgroup tree until it is empty (processes may fork while being killed)."""
    deadline = time.monotonic() + timeout
    while pids := _cgroup_pids(name):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of cgroup {name} survive SIGKILL: {sorted(pids)}")
        time.sleep(0.1)


def _remove_cgroup(name: str) -> None:
    for hierarchy in CGROUP_ROOT.iterdir():  # the kubelet adds its root to the empty cgroup2 mount too
        root = hierarchy / name
        if not root.exists():
            continue
        for directory, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
            for attempt in range(50):  # a cgroup whose last process just died may still be busy briefly
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt == 49:
                        raise
                    time.sleep(0.1)


def _kill_processes_with(marker: str) -> None:
    for pid in [pid for pid, line in cmdlines() if marker in line and pid != os.getpid()]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _unmount_under(root: Path) -> None:
    """Detach every mount at or below root, deepest first (kubelet's volumes, containerd's rootfs, shm and
    network-namespace mounts, and kubelet's rshared bind mount of its own root directory)."""
    prefix = str(root)
    for _ in range(10):  # a detach can reveal a mount below it
        with open("/proc/self/mountinfo") as mountinfo:
            points = [
                line.split()[4]
                for line in mountinfo
                if line.split()[4] == prefix or line.split()[4].startswith(prefix + "/")
            ]
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            # mountinfo escapes spaces and such as octal; our paths have none.
            if _libc.umount2(point.encode(), _MNT_DETACH) != 0:
                errno = ctypes.get_errno()
                if errno not in (22, 2):  # EINVAL: not a mount any more; ENOENT: gone
                    raise OSError(errno, f"umount {point}: {os.strerror(errno)}")
    raise RuntimeError(f"mounts under {root} keep coming back")


def _iptables_chains_cleanup() -> None:
    """Removes what kubelet and kube-proxy add to iptables: every KUBE-* chain and every jump to one, in
    each table of iptables and ip6tables. Nothing else is touched."""
    for binary in ("iptables", "ip6tables"):
        if shutil.which(binary) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            listed = subprocess.run(
                [binary, "-w", "-t", table, "-S"], capture_output=True, text=True, timeout=30, check=False
            )
            if listed.returncode != 0:
                continue
            rules = listed.stdout.splitlines()
            for rule in rules:
                if rule.startswith("-A ") and " -j KUBE-" in rule:
                    subprocess.run(
                        [binary, "-w", "-t", table, "-D", *rule.split()[1:]],
                        capture_output=True,
                        timeout=30,
                        check=False,
                    )
            chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
            for flag in ("-F", "-X"):
                for chain in chains:
                    subprocess.run(
                        [binary, "-w", "-t", table, flag, chain], capture_output=True, timeout=30, check=False
                    )


def _nft_tables() -> list[str] | None:
    """`ip filter`, `ip6 nat`, ...: the nftables tables (where iptables is iptables-nft)."""
    if shutil.which("nft") is None:
        return None
    listed = subprocess.run(["nft", "list", "tables"], check=True, capture_output=True, text=True, timeout=30)
    return sorted(line.removeprefix("table ").strip() for line in listed.stdout.splitlines() if line.strip())


@dataclass(frozen=True)
class MachineBefore:
    """The machine before a run, for its teardown (saved to disk: a SIGKILLed run is swept by the next)."""

    sysctls: dict[str, str]
    fixed_paths: dict[str, list[str] | None]  # entries of each fixed directory, None where it did not exist
    new_parents: list[str]  # the fixed directories' ancestors that did not exist either
    nft_tables: list[str] | None  # iptables-nft keeps its tables when emptied: the new ones go; None: no nft

    @classmethod
    def read(cls) -> MachineBefore:
        sysctls = {name: value for name in SYSCTLS if (value := read_sysctl(name)) is not None}
        paths = {path: sorted(os.listdir(path)) if os.path.isdir(path) else None for path in FIXED_PATHS}
        parents = {str(p) for path in FIXED_PATHS for p in Path(path).parents if not p.exists()}
        return cls(sysctls, paths, sorted(parents), _nft_tables())

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__))

    @classmethod
    def load(cls, path: Path) -> MachineBefore:
        return cls(**json.loads(path.read_text()))

    def restore(self) -> None:
        if self.nft_tables is not None:
            for table in set(_nft_tables() or ()) - set(self.nft_tables):
                subprocess.run(["nft", "delete", "table", *table.split()], check=True, timeout=30)
        for name, value in self.sysctls.items():
            if read_sysctl(name) not in (None, value):
                write_sysctl(name, value)
        for directory, entries in self.fixed_paths.items():
            path = Path(directory)
            if entries is None:
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_dir():  # only what the run added: others may write here too
                for entry in set(os.listdir(path)) - set(entries):
                    target = path / entry
                    if target.is_dir() and not target.is_symlink():
                        shutil.rmtree(target, ignore_errors=True)
                    else:
                        target.unlink(missing_ok=True)
        for directory in self.new_parents:  # made by the run for the paths above (/var/lib/cni, ...)
            shutil.rmtree(directory, ignore_errors=True)


def _teardown(workdir: Path, before: MachineBefore, node_names: list[str]) -> None:
    """Undo a run, whatever state it is in: processes, mounts, cgroups, links, iptables, sysctls, paths."""
    for name in node_names:
        _kill_cgroup(name)
    _kill_processes_with(str(workdir))  # shims (their -address is under workdir), kubelets, containerd
    _unmount_under(workdir)
    for name in node_names:
        _remove_cgroup(name)
    for link in network.our_links():
        network.delete_link(link)
    _iptables_chains_cleanup()
    before.restore()
    shutil.rmtree(workdir, ignore_errors=True)


def sweep_abandoned() -> None:
    """Tear down runs whose owner died without doing it (SIGKILL): the next run would inherit their mess."""
    for workdir in STATE_ROOT.glob(f"{_WORKDIR_PREFIX}*"):
        state = workdir / _STATE_FILE
        try:
            owner = int((workdir / "owner.pid").read_text())
            os.kill(owner, 0)
            continue  # alive
        except (FileNotFoundError, ValueError):
            if not state.exists():
                continue
        except ProcessLookupError:
            pass
        nodes = json.loads((workdir / "nodes.json").read_text()) if (workdir / "nodes.json").exists() else []
        before = MachineBefore.load(state) if state.exists() else MachineBefore({}, {}, [], None)
        _teardown(workdir, before, nodes)


@contextlib.contextmanager
def _machine_lock(timeout: float = 1800.0) -> Iterator[None]:
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = _LOCK.open("w")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"another real-node run holds {_LOCK}") from None
            time.sleep(1)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


@dataclass
class RealNode:
    index: int
    name: str
    workdir: Path
    containerd: ManagedProcess | None = None
    kubelet: ManagedProcess | None = None

    @property
    def address(self) -> str:
        return network.node_address(self.index)

    @property
    def cgroup(self) -> str:
        return self.name

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    def prepare(self, plane: ControlPlane) -> None:
        """Config files, the node's bridge and cgroup root, and its client certificate."""
        for sub in ("containerd", "kubelet", "cni/net.d", "cni/ipam", "logs", "pod-logs"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        network.add_bridge(network.node_link(self.index), f"{self.address}/24")
        _create_cgroup(self.cgroup)
        (self.workdir / "cni" / "net.d" / "10-ftspark.conflist").write_text(
            network.cni_conflist(self.index, self.workdir / "cni" / "ipam")
        )
        containerd = self.workdir / "containerd"
        (containerd / "config.toml").write_text(
            f"""version = 2
root = "{containerd / "root"}"
state = "{containerd / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{containerd / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/{PAUSE_IMAGE}"
  # The VM lacks CAP_SYS_RESOURCE: kubelet's oom_score_adj of -998 would fail every sandbox.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.workdir / "cni" / "net.d"}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{containerd / "runc"}"
"""
        )
        kubelet = self.workdir / "kubelet"
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(plane.ca_path)},
            },
            "authorization": {"mode": "Webhook"},
            "address": self.address,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "cgroupDriver": "cgroupfs",
            # Two kubelets under one cgroup root kill each other's pods as orphans.
            "cgroupRoot": f"/{self.cgroup}",
            "failSwapOn": False,
            "failCgroupV1": False,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": str(self.workdir / "pod-logs"),
            "staticPodPath": "",
            "clusterDomain": "cluster.local",
            "registerNode": True,
            "nodeStatusUpdateFrequency": "2s",
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # Every node advertises the whole machine; eviction must not trigger on what other nodes use.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "serializeImagePulls": False,
        }
        (kubelet / "config.yaml").write_text(yaml.safe_dump(config))
        shutil.copy(
            plane.kubeconfig_for(f"system:node:{self.name}", groups=("system:nodes",)),
            kubelet / "kubeconfig",
        )

    def start(self, plane: ControlPlane) -> None:
        logs = self.workdir / "logs"
        self.containerd = ManagedProcess(
            "containerd", ["containerd", "--config", str(self.workdir / "containerd" / "config.toml")], logs
        )
        self.containerd.start()
        deadline = time.monotonic() + 30
        while self.ctr("version", check=False).returncode != 0:
            if not self.containerd.running() or time.monotonic() > deadline:
                raise RuntimeError(f"containerd of {self.name} did not start:\n{self.containerd.log_tail()}")
            time.sleep(0.2)
        kubelet = self.workdir / "kubelet"
        self.kubelet = ManagedProcess(
            "kubelet",
            [
                str(plane.bin_dir / "kubelet"),
                f"--config={kubelet / 'config.yaml'}",
                f"--kubeconfig={kubelet / 'kubeconfig'}",
                f"--root-dir={kubelet / 'root'}",
                f"--cert-dir={kubelet / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                # Its default, /usr/libexec/kubernetes/..., is a directory of the machine's.
                f"--volume-plugin-dir={kubelet / 'volume-plugins'}",
                "--v=1",
            ],
            self.workdir / "logs",
        )
        self.kubelet.start()

    def ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            check=check,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def import_image(self, archive: Path) -> None:
        self.ctr("images", "import", str(archive))

    def kill(self) -> None:
        """A node loss: its kubelet, containerd, shims and containers all die at once (SIGKILL)."""
        for process in (self.kubelet, self.containerd):
            if process is not None:
                process.kill()
        _kill_processes_with(str(self.socket))  # the shims
        _kill_cgroup(self.cgroup)


@dataclass
class RealNodes:
    """open() before the control plane (it needs the host address), start(plane) after it, then stop()."""

    nodes: int = 2
    images: Mapping[str, Path] = field(default_factory=dict)  # reference → OCI archive (make images)
    prefix: str = "real"
    plane: ControlPlane | None = None
    members: list[RealNode] = field(default_factory=list)
    start_seconds: float = 0.0
    _lock: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _proxy: ManagedProcess | None = None
    _before: MachineBefore | None = None

    @property
    def workdir(self) -> Path:
        return STATE_ROOT / f"{_WORKDIR_PREFIX}{os.getpid()}"

    def open(self) -> RealNodes:
        """Take the machine: the lock, a record of what it looked like, and the host's address for pods."""
        if PAUSE_IMAGE not in self.images:
            raise ValueError(f"real nodes need the sandbox image {PAUSE_IMAGE} (make images)")
        self._lock.enter_context(_machine_lock())
        try:
            sweep_abandoned()
            self.workdir.mkdir(parents=True, exist_ok=True)
            (self.workdir / "owner.pid").write_text(str(os.getpid()))
            self._before = MachineBefore.read()
            self._before.save(self.workdir / _STATE_FILE)
            self.members = [
                RealNode(i, f"{self.prefix}{i}", self.workdir / f"node{i}") for i in range(1, self.nodes + 1)
            ]
            (self.workdir / "nodes.json").write_text(json.dumps([m.cgroup for m in self.members]))
            network.add_bridge(network.HOST_LINK, f"{network.HOST_ADDRESS}/32")
            # Pods on one node reach pods on another, and the host, through the host's routing.
            write_sysctl("net/ipv4/ip_forward", "1")
        except BaseException:
            self.stop()
            raise
        return self

    def start(self, plane: ControlPlane) -> RealNodes:
        """Join the nodes to plane, started with address=HOST_ADDRESS and service_cidr=SERVICE_CIDR."""
        if plane.address != network.HOST_ADDRESS or plane.service_cidr != network.SERVICE_CIDR:
            raise ValueError("real nodes need ControlPlane(address=HOST_ADDRESS, service_cidr=SERVICE_CIDR)")
        self.plane = plane
        started = time.monotonic()
        try:
            for node in self.members:
                node.prepare(plane)
                # From this thread: the processes die with the thread that started them (ManagedProcess).
                node.start(plane)
            with ThreadPoolExecutor(max_workers=len(self.members)) as pool:
                list(pool.map(self._import_images, self.members))
            self._start_proxy(plane)
            self._wait_ready(self.members)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _import_images(self, node: RealNode) -> None:
        for archive in self.images.values():
            node.import_image(archive)

    def _start_proxy(self, plane: ControlPlane) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(plane.kubeconfig_for("system:kube-proxy"))},
            "mode": "iptables",
            "clusterCIDR": network.CLUSTER_CIDR,
            "hostnameOverride": self.members[0].name,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [network.POD_NETWORK],
            # Each of these would otherwise change a sysctl of the machine.
            "iptables": {"localhostNodePorts": False, "minSyncPeriod": "0s", "syncPeriod": "30s"},
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        path = self.workdir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self._proxy = ManagedProcess(
            "kube-proxy", [str(plane.bin_dir / "kube-proxy"), f"--config={path}"], self.workdir / "logs"
        )
        self._proxy.start()

    def _wait_ready(self, nodes: list[RealNode]) -> None:
        assert self.plane is not None
        deadline = time.monotonic() + _NODE_READY_TIMEOUT
        pending = {n.name for n in nodes}
        while pending:
            for node in nodes:
                if node.kubelet is not None and not node.kubelet.running():
                    raise RuntimeError(f"kubelet of {node.name} exited:\n{node.kubelet.log_tail()}")
            ready_of = '{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} '
            listed = self.plane.kubectl(
                "get", "nodes", "-o", f"jsonpath={{range .items[*]}}{ready_of}{{end}}"
            ).stdout.split()
            ready = {entry.split("=")[0] for entry in listed if entry.endswith("=True")}
            pending -= ready
            if pending and time.monotonic() > deadline:
                tails = "\n".join(f"{n.name}:\n{n.kubelet.log_tail()}" for n in nodes if n.kubelet)
                raise TimeoutError(f"nodes not Ready after {_NODE_READY_TIMEOUT:.0f} s: {pending}\n{tails}")
            time.sleep(0.3)

    def node(self, name: str) -> RealNode:
        return next(n for n in self.members if n.name == name)

    def kill_node(self, name: str) -> None:
        self.node(name).kill()

    def restart_node(self, name: str) -> None:
        node = self.node(name)
        assert self.plane is not None
        node.start(self.plane)
        self._wait_ready([node])

    def stop(self) -> None:
        try:
            if self._before is not None:
                for node in self.members:
                    if node.kubelet is not None:
                        node.kubelet.stop(grace_seconds=5)
                if self._proxy is not None and self.plane is not None:
                    self._proxy.stop()
                    subprocess.run(
                        [str(self.plane.bin_dir / "kube-proxy"), "--cleanup"],
                        capture_output=True,
                        timeout=60,
                        check=False,
                    )
                _teardown(self.workdir, self._before, [n.cgroup for n in self.members])
        finally:
            self._lock.close()
