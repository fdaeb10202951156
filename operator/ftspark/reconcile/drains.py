"""Which nodes are being drained, and which jobs' drivers run on each: what the node and driver pod watches
told last. A driver on such a node is relocated (domain.lifecycle: phase Relocating) before the drain's
eviction, which its disruption budget holds off, would kill it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ftspark.domain.ha import JobKey

# What a drain puts on a node before it evicts: kubectl drain's cordon (spec.unschedulable, and its taint),
# the cluster autoscaler's scale-down and Karpenter's disruption.
DRAIN_TAINTS = frozenset(
    {"node.kubernetes.io/unschedulable", "ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted"}
)


def is_draining(node_spec: Mapping[str, Any]) -> bool:
    """Whether a node's spec says its pods are about to be evicted."""
    taints = node_spec.get("taints") or ()
    return bool(node_spec.get("unschedulable")) or any(
        isinstance(taint, Mapping) and taint.get("key") in DRAIN_TAINTS for taint in taints
    )


class NodeDrains:
    """Thread-safe: the watch's thread writes, the reconcile workers read (the Nodes port)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._draining: set[str] = set()
        self._drivers: dict[tuple[str, str], tuple[str, JobKey]] = {}  # (namespace, pod) -> (node, job)

    def draining(self, node: str) -> bool:
        with self._lock:
            return node in self._draining

    def node_seen(self, node: str, draining: bool) -> list[JobKey]:
        """Record the node's state; the jobs with a driver there when it starts to drain (to wake)."""
        with self._lock:
            started = draining and node not in self._draining
            if draining:
                self._draining.add(node)
            else:
                self._draining.discard(node)
            if not started:
                return []
            return list(dict.fromkeys(job for on, job in self._drivers.values() if on == node))

    def driver_seen(self, job: JobKey, pod: str, node: str, *, gone: bool = False) -> None:
        with self._lock:
            if gone or not node:
                self._drivers.pop((job.namespace, pod), None)
            else:
                self._drivers[(job.namespace, pod)] = (node, job)
