"""What a real-node run may change on the machine, read before and after, and undone by name.

Kubelets, containerd and kube-proxy write to global places: sysctls, iptables chains, cgroups, mounts, network
links and a few fixed host paths. `HostState.read()` captures each of them; `HostState.changes()` says what is
different, so a test can prove that a run left the machine as it found it.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

# The kernel tunables kubelet (setupKernelTunables), kube-proxy (conntrack, route_localnet) and the pod
# network (forwarding) may set. Restored by value at teardown.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/bridge/bridge-nf-call-iptables",
)

# Fixed host paths containerd 1.6 (CNI results, shim sockets) and the kubelet (log links, its device-plugin
# socket, the exec volume-plugin directory) write whatever their configuration says.
FIXED_PATHS = (
    "/var/lib/cni/results",
    "/run/containerd/s",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/usr/libexec/kubernetes",
)

# Processes of a real-node run, by name: a new one after teardown is a leak.
_RUN_PROCESS = re.compile(r"containerd|kubelet|kube-proxy|kubebin|runc|/pause|KubernetesExecutorBackend")
_COUNTERS = re.compile(r"\[\d+:\d+\]")


def read_sysctl(name: str) -> str | None:
    try:
        return (Path("/proc/sys") / name).read_text().strip()
    except OSError:  # not on this kernel, or its module is not loaded
        return None


def write_sysctl(name: str, value: str) -> None:
    (Path("/proc/sys") / name).write_text(value + "\n")


def _iptables(binary: str) -> tuple[str, ...]:
    """The ruleset without packet counters and comments, which change on their own."""
    try:
        out = subprocess.run([binary], check=True, capture_output=True, text=True, timeout=30).stdout
    except FileNotFoundError:
        return ()
    return tuple(_COUNTERS.sub("[0:0]", line) for line in out.splitlines() if not line.startswith("#"))


def _cgroups() -> frozenset[str]:
    """Top-level cgroups of every hierarchy: a kubelet's cgroupRoot and anything it makes beside it live there
    (deeper levels also change with whatever else the machine runs)."""
    return frozenset(
        str(child) for hierarchy in CGROUP_ROOT.iterdir() for child in hierarchy.iterdir() if child.is_dir()
    )


def _mounts() -> frozenset[str]:
    with open("/proc/self/mountinfo") as mountinfo:
        return frozenset(line.split()[4] for line in mountinfo)


def cmdlines() -> Iterator[tuple[int, str]]:
    """(pid, command line) of every process of the machine."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:  # ended meanwhile
                continue
            yield int(entry.name), raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _processes() -> frozenset[str]:
    return frozenset(f"{pid} {line[:200]}" for pid, line in cmdlines() if _RUN_PROCESS.search(line))


@dataclass(frozen=True)
class HostState:
    processes: frozenset[str]
    mounts: frozenset[str]
    links: frozenset[str]
    cgroups: frozenset[str]
    sysctls: tuple[tuple[str, str | None], ...]
    iptables: tuple[str, ...]
    ip6tables: tuple[str, ...]
    fixed_paths: tuple[tuple[str, bool], ...]

    @classmethod
    def read(cls) -> HostState:
        return cls(
            processes=_processes(),
            mounts=_mounts(),
            links=frozenset(os.listdir("/sys/class/net")),
            cgroups=_cgroups(),
            sysctls=tuple((name, read_sysctl(name)) for name in SYSCTLS),
            iptables=_iptables("iptables-save"),
            ip6tables=_iptables("ip6tables-save"),
            fixed_paths=tuple((path, os.path.exists(path)) for path in FIXED_PATHS),
        )

    def changes(self, after: HostState) -> list[str]:
        """Everything that differs from this state in after, one line each (empty: the same machine)."""

        def diff(kind: str, before: Iterable[str], now: Iterable[str]) -> list[str]:
            old, new = set(before), set(now)
            return [f"{kind} added: {x}" for x in sorted(new - old)] + [
                f"{kind} removed: {x}" for x in sorted(old - new)
            ]

        # A process of the machine's own that ended meanwhile is no change of ours; a new one is a leak.
        changes = [
            *[f"process added: {p}" for p in sorted(after.processes - self.processes)],
            *diff("mount", self.mounts, after.mounts),
            *diff("link", self.links, after.links),
            *diff("cgroup", self.cgroups, after.cgroups),
            *diff("iptables", self.iptables, after.iptables),
            *diff("ip6tables", self.ip6tables, after.ip6tables),
        ]
        changes += [
            f"sysctl {name}: {old} -> {new}"
            for (name, old), (_, new) in zip(self.sysctls, after.sysctls, strict=True)
            if old != new
        ]
        changes += [
            f"path {path}: existed {old} -> {new}"
            for (path, old), (_, new) in zip(self.fixed_paths, after.fixed_paths, strict=True)
            if old != new
        ]
        return changes
