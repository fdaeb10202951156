"""The leader's housekeeping of the job result store and the HA records (the controller runs it
periodically): cleanups left half done, records of jobs deleted while no leader watched, localRecovery's
volumes of deleted jobs, results past their retention."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey, JobResultEntry
from ftspark.domain.recovery import is_checkpoint_folder
from ftspark.metrics import UNTRUSTED_POINTERS
from ftspark.reconcile.settings import Ports, ResultLimits

log = logging.getLogger(__name__)


class ResultSweeper:
    def __init__(
        self,
        ports: Ports,
        epoch: Callable[[], Epoch],
        clock: Callable[[], datetime],
        forget: Callable[[JobKey], None],
        limits: ResultLimits,
    ) -> None:
        """forget: deletes a job's HA records (the actuator's, as for a job deleted while watched)."""
        self._jobs, self._drivers = ports.jobs, ports.drivers
        self._graphs, self._results = ports.stores.job_graphs, ports.stores.results
        self._storage, self._epoch, self._clock, self._forget = ports.storage, epoch, clock, forget
        self._max_retention, self._max_results = limits.max_retention_seconds, limits.max_per_namespace

    def finish_dirty_results(self) -> int:
        """Complete cleanups left half done (FLIP-194), by a previous leader or a failed delete; returns how
        many."""
        finished = 0
        for entry in self._results.entries():
            if entry.clean:
                continue
            try:
                self._drivers.delete_all(entry.job, entry.uid)
                self._results.mark_clean(entry.uid, self._epoch())
                finished += 1
            except Exception:
                # One job's refused delete must not keep the others' cleanups waiting.
                log.exception("%s: its cleanup failed; trying again at the next sweep", entry.job)
        return finished

    def forget_orphans(self) -> int:
        """Delete the HA data of jobs deleted while no leader watched; returns how many jobs."""
        forgotten = 0
        for key in self._graphs.jobs():
            try:
                if self._jobs.get(key) is None:
                    self._forget(key)
                    forgotten += 1
            except Exception:
                # Records sit where tenants write: one that cannot be forgotten must not keep the others.
                log.exception("%s: its HA data could not be deleted; trying again at the next sweep", key)
        return forgotten

    def delete_orphan_volumes(self) -> int:
        """Delete localRecovery's volumes whose job is gone (deleted, or re-created with another uid); returns
        how many. Cluster-scoped, so no owner reference takes them with the job. Stale-safe: a uid never
        comes back, and a job's volume in use cannot be deleted before its claim is (the API server's
        pv-protection)."""
        deleted = 0
        for key, uid in self._drivers.local_state_volumes():
            try:
                job = self._jobs.get(key)
                if job is None or job.uid != uid:
                    self._drivers.delete_local_state_volume(uid)
                    deleted += 1
            except Exception:
                log.exception(
                    "%s: its local-state volume could not be deleted; trying again at the next sweep", key
                )
        return deleted

    def expire_results(self) -> int:
        """Delete clean results past their retention (the job's ttlSeconds, at most the operator's maximum)
        and, in a namespace holding more than the cap, the oldest beyond it; returns how many. Never one
        whose job resource still exists with its uid: that result is what keeps a new leader from running a
        finished job again. A namespace whose results cannot be swept does not keep the others."""
        by_namespace: dict[str, list[JobResultEntry]] = {}
        for entry in self._results.entries():
            if entry.clean:  # a dirty one is finish_dirty_results' to complete first
                by_namespace.setdefault(entry.job.namespace, []).append(entry)
        expired = 0
        for namespace, entries in sorted(by_namespace.items()):
            try:
                expired += self._expire_in(sorted(entries, key=lambda e: e.finished_at))
            except Exception:
                log.exception("%s: its results could not be swept; trying again at the next sweep", namespace)
        return expired

    def _expire_in(self, oldest_first: list[JobResultEntry]) -> int:
        """One namespace's clean results, oldest first."""
        now, expired = self._clock(), 0
        beyond_cap = len(oldest_first) - self._max_results
        for entry in oldest_first:
            retention = min(entry.retain_seconds or self._max_retention, self._max_retention)
            past = (now - entry.finished_at).total_seconds() >= retention
            if not (past or expired < beyond_cap):
                continue
            job = self._jobs.get(entry.job)
            if job is None or job.uid != entry.uid:
                for prefix in entry.data:  # before the entry: a crash in between deletes again next time
                    if not is_checkpoint_folder(prefix, entry.uid):
                        # Sealed, so the operator's own words; yet only its own naming is ever deleted.
                        UNTRUSTED_POINTERS.labels(pointer="result-data").inc()
                        log.warning(
                            "result %s names %s, no checkpoint folder of its job; kept", entry.uid, prefix
                        )
                        continue
                    self._epoch()  # still leading (raises otherwise): a deposed leader deletes nothing
                    self._storage.delete_prefix(prefix)
                self._results.delete(entry.uid, self._epoch())
                expired += 1
        return expired
