"""What the operator knows of nodes, from its watches: which are being drained (the node watch), which stopped
renewing their Lease in kube-node-lease (the node-Lease watch), and which jobs' drivers run on each (the
driver pod watch).

A driver on a draining node is relocated (domain.lifecycle: phase Relocating) before the drain's eviction,
which its disruption budget holds off, would kill it. A driver on a silent node may be on a dead one: the node
controller says so only after its grace period (50 s by default), and then a new driver starts from nothing.
The job gets a standby meanwhile (docs/hot-standby.md, "A standby when the driver's node falls silent"). Its
driver is given up at the node controller's verdict, or sooner once its own driver Lease has not been renewed
for the Lease's duration while the node stays silent (reconcile.driver_pods.presumed_lost); that Lease is
looked at from the moment the node is late, a renewal overdue. Both are timed by this process's clock, from
the last change it saw (a node Lease's renewTime, a driver Lease's version), as the node controller times a
node: no other host's clock is compared with ours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ftspark.domain.ha import JobKey

# What a drain puts on a node before it evicts: kubectl drain's cordon (spec.unschedulable, and its taint),
# the cluster autoscaler's scale-down and Karpenter's disruption.
DRAIN_TAINTS = frozenset(
    {"node.kubernetes.io/unschedulable", "ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted"}
)


# A kubelet renews its node's Lease every 10 s (a quarter of its 40 s duration): this is two renewals missed.
NODE_SILENCE_SECONDS = 20.0
# A node is late, one renewal overdue, after this share of the silence threshold (12 s of 20): the Leases of
# the drivers there are looked at from then on, so that a driver's own silence is timed from before its node's
# (reconcile.driver_pods.presumed_lost waits for the driver Lease's duration from the first look).
LATE_SHARE = 0.6
# Where kubelets keep their node's Lease, named as the node.
NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass(frozen=True)
class _LeaseSighting:
    """A job's driver Lease at one version: when this process first saw it, how long a renewal holds."""

    version: str
    since: float
    duration: float
    woken: bool = False  # its job was woken when the duration was reached


def is_draining(node_spec: Mapping[str, Any]) -> bool:
    """Whether a node's spec says its pods are about to be evicted."""
    taints = node_spec.get("taints") or ()
    return bool(node_spec.get("unschedulable")) or any(
        isinstance(taint, Mapping) and taint.get("key") in DRAIN_TAINTS for taint in taints
    )


class NodeWatch:
    """Thread-safe: the watches' threads write, the reconcile workers read (the Nodes port).

    silence_seconds: a node whose Lease has not been renewed for longer is silent (0: never; its Lease is
    not watched)."""

    def __init__(self, silence_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.silence_seconds, self._clock = silence_seconds, clock
        self._lock = threading.Lock()
        self._draining: set[str] = set()
        self._drivers: dict[tuple[str, str], tuple[str, JobKey]] = {}  # (namespace, pod) -> (node, job)
        self._renewals: dict[str, tuple[str, float]] = {}  # node -> (renewTime, when we saw it change)
        self._silent: set[str] = set()  # as the last newly_silent() found them
        self._late: set[str] = set()  # as the last newly_late() found them
        self._driver_leases: dict[JobKey, _LeaseSighting] = {}  # of jobs whose driver's node is late

    def draining(self, node: str) -> bool:
        with self._lock:
            return node in self._draining

    def silent(self, node: str) -> bool:
        """Whether the node's kubelet has not renewed its Lease for silence_seconds; False for a node whose
        Lease was never seen (no evidence)."""
        with self._lock:
            return self._is_quiet(node, self._clock(), self.silence_seconds)

    def late(self, node: str) -> bool:
        """Whether the node's Lease is a renewal overdue (LATE_SHARE of silence_seconds): silent ones too."""
        with self._lock:
            return self._is_quiet(node, self._clock(), LATE_SHARE * self.silence_seconds)

    def node_seen(self, node: str, draining: bool) -> list[JobKey]:
        """Record the node's state; the jobs with a driver there when it starts to drain (to wake)."""
        with self._lock:
            started = draining and node not in self._draining
            if draining:
                self._draining.add(node)
            else:
                self._draining.discard(node)
            return self._jobs_on({node}) if started else []

    def lease_seen(self, node: str, renew_time: str, age: float = 0.0) -> list[JobKey]:
        """Record the node's Lease as its watch served it; the jobs with a driver there when a silent node
        speaks again (to wake: their standby is not wanted any more). age: how old renew_time is by this
        process's clock, believed for a Lease seen the first time only (a new leader, whose predecessor may
        have died with the node), and up to the silence threshold."""
        with self._lock:
            known = self._renewals.get(node)
            if known is not None and known[0] == renew_time:
                return []
            credited = 0.0 if known is not None else min(max(age, 0.0), self.silence_seconds)
            self._renewals[node] = (renew_time, self._clock() - credited)
            if node not in self._silent:
                return []
            self._silent.discard(node)
            return self._jobs_on({node})

    def lease_gone(self, node: str) -> None:
        """The node's Lease was deleted (the node was): nothing is known of its silence any more."""
        with self._lock:
            self._renewals.pop(node, None)
            self._silent.discard(node)
            self._late.discard(node)

    def newly_silent(self) -> list[JobKey]:
        """The jobs with a driver on a node that fell silent since the last call (to wake)."""
        with self._lock:
            now = self._clock()
            silent = {node for node in self._renewals if self._is_quiet(node, now, self.silence_seconds)}
            fallen, self._silent = silent - self._silent, silent
            return self._jobs_on(fallen) if fallen else []

    def newly_late(self) -> list[JobKey]:
        """The jobs with a driver on a node that became late since the last call (to wake: their driver's
        Lease is looked at first then)."""
        with self._lock:
            now, threshold = self._clock(), LATE_SHARE * self.silence_seconds
            late = {node for node in self._renewals if self._is_quiet(node, now, threshold)}
            fallen, self._late = late - self._late, late
            return self._jobs_on(fallen) if fallen else []

    def lease_unchanged_for(self, job: JobKey, version: str, duration: float) -> float:
        """Seconds since this process first saw the job's driver Lease at this version."""
        with self._lock:
            now = self._clock()
            seen = self._driver_leases.get(job)
            if seen is None or seen.version != version:
                seen = self._driver_leases[job] = _LeaseSighting(version, now, duration)
            return now - seen.since

    def lapses_due(self) -> list[JobKey]:
        """The jobs whose driver Lease, on a late node, has just gone unchanged for its duration (to wake,
        once each); what is known of the others' Leases is forgotten once their driver's node is heard again
        or their driver is gone."""
        with self._lock:
            now, on_late = self._clock(), set(self._jobs_on(self._late))
            due = []
            for job, seen in list(self._driver_leases.items()):
                if job not in on_late:
                    del self._driver_leases[job]
                elif not seen.woken and now - seen.since >= seen.duration:
                    self._driver_leases[job] = _LeaseSighting(seen.version, seen.since, seen.duration, True)
                    due.append(job)
            return due

    def driver_seen(self, job: JobKey, pod: str, node: str, *, gone: bool = False) -> None:
        with self._lock:
            if gone or not node:
                self._drivers.pop((job.namespace, pod), None)
            else:
                self._drivers[(job.namespace, pod)] = (node, job)

    def _is_quiet(self, node: str, now: float, threshold: float) -> bool:
        """Whether the node's Lease has not changed for threshold seconds, and that is believed."""
        seen = self._renewals.get(node)
        if not threshold or seen is None or now - seen[1] <= threshold:
            return False
        # Silence is believed only while the others are heard: no Lease changed within the threshold means
        # the watch is broken or behind (or the API server down), and more than half of the nodes silent at
        # once is more likely the API server's trouble than theirs. Standbys for every job would add to it.
        changes = [changed for _, changed in self._renewals.values()]
        quiet = sum(now - changed > threshold for changed in changes)
        return quiet < len(changes) and 2 * quiet <= len(changes)

    def _jobs_on(self, nodes: set[str]) -> list[JobKey]:
        return list(dict.fromkeys(job for on, job in self._drivers.values() if on in nodes))
