"""Prometheus metrics, all prefixed ftspark_. Process-wide (prometheus_client's default registry), as usual.

Per-job figures come from the statuses the reconciler records (JobMetrics); the rest is counted where it
happens: reconciles in the controller, store conflicts in the fenced CAS loop, leadership in app.main (the
term floors ignored in leader.elector), API requests in adapters.k8s.counted, the local-state sweeper's
work in app.sweeper.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from ftspark.domain.ha import JobKey
from ftspark.domain.models import BatchFigures, Failure, JobStatus

RECONCILE_SECONDS = Histogram(
    "ftspark_reconcile_duration_seconds",
    "Time of one reconcile of one job (observe, decide, act, record).",
    ["outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RECOVERY_PHASE_SECONDS = Histogram(
    "ftspark_recovery_phase_seconds",
    "For each recovery a later attempt's first committed batch ended: seconds from the failure until each "
    "step was done (status.lastFailure.recoveryPhases; a step's own time is its figure less the step's "
    "before). way: new-driver, or standby (a hot standby promoted).",
    ["phase", "way"],
    buckets=(0.5, 1, 2, 3, 5, 8, 12, 16, 20, 30, 45, 60, 90, 120, 180, 300),
)
LEADER = Gauge("ftspark_leader", "1 while this replica holds the operator Lease, else 0.")
LEASE_TRANSITIONS = Counter("ftspark_lease_transitions_total", "Changes of the operator Lease holder seen.")
IGNORED_TERM_FLOORS = Counter(
    "ftspark_term_floor_ignored_total",
    "Reads of the term floor that held no term a Lease could follow (unreadable, or at or past int32): "
    "ignored and replaced at the next acquisition. Only admins write there: look at who did.",
)
FAILOVER_SECONDS = Gauge(
    "ftspark_failover_duration_seconds",
    "At this replica's last take-over: seconds since it first saw the previous holder's last renew (0 after "
    "a release).",
)
STORE_CONFLICTS = Counter(
    "ftspark_store_conflicts_total", "Compare-and-swap conflicts in the HA stores (retried).", ["record"]
)
FENCED_WRITES = Counter(
    "ftspark_store_fenced_writes_total", "HA store writes refused for a stale epoch.", ["scope"]
)
API_REQUESTS = Counter(
    "ftspark_api_requests_total",
    "Requests made of the API server (watches aside), by Kubernetes verb and resource.",
    ["verb", "resource"],
)
HOUSEKEEPING = Counter(
    "ftspark_housekeeping_steps_total",
    "The leader's periodic housekeeping steps run (finish_dirty_results, forget_orphans, "
    "delete_orphan_volumes, expire_results: "
    "every --result-sweep-seconds), by outcome (ok, error).",
    ["step", "outcome"],
)
UNTRUSTED_POINTERS = Counter(
    "ftspark_untrusted_pointers_total",
    "Pointers in HA records the operator refused to follow (read, delete or inspect): not a name it wrote, "
    "or a directory it chose, for the job; and HA records whose seal did not verify, by kind.",
    ["pointer"],
)

LOCAL_STATE_BYTES_FREED = Counter(
    "ftspark_local_state_bytes_freed_total",
    "Bytes of localRecovery's node-local directories the sweeper removed (whole directories of jobs that are "
    "gone, and copies of live jobs over their bound).",
    ["reason"],
)
LOCAL_STATE_DIRS_REMOVED = Counter(
    "ftspark_local_state_dirs_removed_total",
    "Directories of jobs that are gone (jobs/<namespace>/<uid>) the sweeper removed from this node.",
)
LOCAL_STATE_SWEEPS = Counter(
    "ftspark_local_state_sweeps_total",
    "Passes of the local-state sweeper: done, or skipped because the jobs could not be listed or the root "
    "could not be scanned (nothing is deleted then).",
    ["outcome"],
)
LOCAL_STATE_OVER_BOUND = Gauge(
    "ftspark_local_state_over_bound_bytes",
    "After the sweeper's last pass: bytes above the per-job bound it could not remove (files newer than the "
    "grace period, or Spark's own files outside state/), all live jobs on this node together.",
)


def observe_recovery(before: Failure | None, after: Failure | None) -> None:
    """A recovery the status just recorded (after's phases, none in before): one observation per step."""
    if after is None or after.recovery_phases is None or (before is not None and before.recovery_phases):
        return
    phases = after.recovery_phases
    way = "standby" if phases.standby else "new-driver"
    for phase, seconds in phases.model_dump(exclude={"standby"}, exclude_none=True).items():
        RECOVERY_PHASE_SECONDS.labels(phase, way).observe(seconds)


class JobMetrics(Collector):
    """ftspark_jobs{phase}, and per job: its phase and conditions, restarts, the last recovery's time, last
    checkpoint id, checkpoint age, the newest batch's figures."""

    def __init__(self) -> None:
        self._statuses: dict[JobKey, JobStatus] = {}
        self._lock = threading.Lock()

    def record(self, key: JobKey, status: JobStatus | None) -> None:
        with self._lock:
            if status is None:
                self._statuses.pop(key, None)
            else:
                self._statuses[key] = status

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            statuses = dict(self._statuses)
        phases = GaugeMetricFamily("ftspark_jobs", "Jobs by lifecycle phase.", labels=["phase"])
        for phase, count in sorted(Tally(s.phase for s in statuses.values()).items()):
            phases.add_metric([phase], count)
        yield phases
        labels = ["namespace", "job"]
        job_phase = GaugeMetricFamily(
            "ftspark_job_phase", "1 for each job's phase: one series a job.", labels=[*labels, "phase"]
        )
        conditions = GaugeMetricFamily(
            "ftspark_job_condition",
            "Each condition of each job: 1 while True, else 0 (alert rules read Degraded and Reconciled).",
            labels=[*labels, "type", "reason"],
        )
        restarts = GaugeMetricFamily("ftspark_job_restarts", "Restarts of the job so far.", labels=labels)
        last_id = GaugeMetricFamily(
            "ftspark_job_last_checkpoint_id",
            "Id of the newest completed checkpoint: the job's checkpoint counter, not a Spark batch id.",
            labels=labels,
        )
        age = GaugeMetricFamily(
            "ftspark_job_checkpoint_age_seconds", "Time since the newest completed checkpoint.", labels=labels
        )
        recovery = GaugeMetricFamily(
            "ftspark_job_last_recovery_seconds",
            "From the job's last failure seen to the next committed batch "
            "(status.lastFailure.recoverySeconds).",
            labels=labels,
        )
        # The newest batch's figures, as its driver reported them (status.latestCheckpoint.figures).
        batch: list[tuple[GaugeMetricFamily, Callable[[BatchFigures], float]]] = [
            (GaugeMetricFamily(f"ftspark_job_{name}", help, labels=labels), value)
            for name, help, value in (
                ("batch_duration_seconds", "How long the newest batch took.", lambda f: f.duration_ms / 1000),
                (
                    "input_rows_per_second",
                    "The rate rows arrived at, newest batch.",
                    lambda f: f.input_rows_per_second,
                ),
                (
                    "processed_rows_per_second",
                    "The rate the newest batch processed rows at: below the input rate for long, it lags.",
                    lambda f: f.processed_rows_per_second,
                ),
                ("state_rows", "Rows in the state stores after the newest batch.", lambda f: f.state_rows),
                (
                    "state_bytes",
                    "Memory of the state stores after the newest batch.",
                    lambda f: f.state_bytes,
                ),
            )
        ]
        now = time.time()
        for key, status in sorted(statuses.items(), key=lambda item: str(item[0])):
            values = [key.namespace, key.name]
            job_phase.add_metric([*values, status.phase], 1)
            for condition in status.conditions:
                conditions.add_metric([*values, condition.type, condition.reason], condition.status == "True")
            restarts.add_metric(values, status.restarts.count)
            failure = status.last_failure
            if failure is not None and failure.recovery_seconds is not None:
                recovery.add_metric(values, failure.recovery_seconds)
            checkpoint = status.latest_checkpoint
            if checkpoint is not None:
                last_id.add_metric(values, checkpoint.id)
                age.add_metric(values, max(0.0, now - checkpoint.time.timestamp()))
                if checkpoint.figures is not None:
                    for family, value in batch:
                        family.add_metric(values, value(checkpoint.figures))
        yield from (job_phase, conditions, restarts, recovery, last_id, age, *(family for family, _ in batch))


JOBS = JobMetrics()
REGISTRY.register(JOBS)
