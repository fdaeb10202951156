"""The start of an attempt, and the end of every decision."""

from __future__ import annotations

from ftspark.domain.lifecycle import attempts, retention, savepointing
from ftspark.domain.lifecycle import standby as hot_standby
from ftspark.domain.lifecycle.actions import (
    Decision,
    DeleteLeftoverExecutors,
    EmitEvent,
    PromoteStandby,
    SubmitAttempt,
)
from ftspark.domain.lifecycle.delays import EXECUTORS_RECHECK, POLL, SOON, STANDBY_RECHECK, WAIT
from ftspark.domain.lifecycle.draft import Draft, ready_condition
from ftspark.domain.lifecycle.observation import DriverObservation
from ftspark.domain.models import CheckpointRef
from ftspark.domain.recovery import checkpoint_directory
from ftspark.protocol import RestoreFrom

QUOTA_EXCEEDED = "QuotaExceeded"  # Ready=False while a ResourceQuota has no room for the attempt's driver


class Submission(Draft):
    """The draft that ends a decision (_done: the standby's and the disposals' rules, which every decision
    runs, and the latest checkpoint) and starts an attempt (_submit, _start): where it restores from, a
    standby promoted or a new pod."""

    def _done(self, requeue_after: float | None = None, *, observed: bool = True) -> Decision:
        """observed=False: this pass only prepared acting on the spec (the next one acts), so its generation
        is not observed yet. Otherwise every decision acts on the whole current spec (an upgrade in progress
        shows as phase Upgrading)."""
        if observed:
            self.update(observed_generation=self.obs.generation)
        if self.status.ui_url != self.obs.ui_url:
            self.update(ui_url=self.obs.ui_url)
        if (soon := hot_standby.tend(self)) is not None:
            requeue_after = min(requeue_after or soon, soon)
        if (disposals := savepointing.finish_disposals(self)) is not None:
            requeue_after = min(requeue_after or disposals, disposals)
        newest = self.obs.latest_checkpoint
        if newest is not None:
            self.update(
                latest_checkpoint=CheckpointRef(
                    id=newest.checkpoint_id,
                    batch_id=newest.batch_id,
                    time=newest.completed_at,
                    location=newest.location,
                    figures=newest.figures,
                )
            )
            attempts.note_commit(self, newest, self.obs.first_of_attempt or newest)
        return Decision(self.status, tuple(self.actions), requeue_after)

    def _submit(
        self, restore_from: RestoreFrom, *, fresh: bool = False, reason: str, message: str
    ) -> Decision:
        """fresh: a new checkpoint directory even though the job has one (a stateless upgrade)."""
        if self.stale or self.current:
            return self._done(WAIT)  # never start an attempt while an earlier driver pod still exists
        if self.obs.leftover_executors:  # nor while an executor of one does
            self.actions.append(DeleteLeftoverExecutors(tuple(s.attempt for s in self.standbys)))
            return self._done(EXECUTORS_RECHECK)
        attempt = self.status.attempt + 1
        graph = None if fresh else self.obs.own_graph
        # A re-created job of the same name is a new job (new uid): it never resumes the old one's state by
        # accident; starting from old state is explicit (initialSavepoint).
        location = (
            graph.checkpoint_location
            if graph is not None
            else checkpoint_directory(self.spec.checkpoint.storage, self.obs.job_uid, attempt)
        )
        if (
            fresh
            and (retiring := retention.retiring(self, location)) != self.status.retired_checkpoint_directories
        ):
            # The directory the fresh run leaves behind is in the status before the run starts: a crash or a
            # refused status write after the submission would otherwise forget it (the new graph names only
            # the new directory).
            self.update(retired_checkpoint_directories=retiring)
            return self._done(SOON, observed=False)
        restore_batch = None
        lost_graph = restore_from == "latest-checkpoint" and graph is None
        recovered = retention.directory_from_status(self) if lost_graph else None
        if hot_standby.starting(self, restore_from, graph, recovered):
            return self._done(STANDBY_RECHECK)  # its readiness wakes the job sooner
        if recovered is not None:
            # The job graph was deleted (by hand, or a namespace restored without it), but the status still
            # names the job's checkpoint directory, one the operator chose for this job: resume there;
            # Spark restores its newest committed batch (the pointers went with the graph, or cannot be
            # trusted without it).
            location = recovered
            self.actions.append(
                EmitEvent(
                    "Warning",
                    "JobGraphRecovered",
                    f"no job graph: attempt {attempt} resumes from its checkpoint directory {recovered}",
                )
            )
        elif lost_graph:
            # No record of where this job's state is: it starts without state, and says so.
            restore_from = "nothing"
            self.actions.append(
                EmitEvent("Warning", "StateNotFound", f"no job graph: attempt {attempt} starts without state")
            )
        elif restore_from == "latest-checkpoint":
            point = self.obs.restore_point
            if point is None:
                return self._done(WAIT)  # not read yet (a driver pod existed when this job was observed)
            if point.unusable:
                return self._manual_restore_required(point.unusable)
            if point.skipped:
                self.actions.append(EmitEvent("Warning", "CheckpointSkipped", point.why_skipped))
            restore_batch = point.pointer.batch_id if point.pointer else None
        standby = hot_standby.promotable(self, restore_from, graph, recovered)
        return self._start(attempt, restore_from, location, restore_batch, standby, reason, message)

    def _start(
        self,
        attempt: int,
        restore_from: RestoreFrom,
        location: str,
        restore_batch: int | None,
        standby: DriverObservation | None,
        reason: str,
        message: str,
    ) -> Decision:
        """The attempt: the standby promoted, else a new pod once no standby holds its name."""
        if standby is not None:
            self.settled.add(standby.pod_name)
            self.actions.append(PromoteStandby(standby.pod_name, attempt, location, restore_batch))
            reason, message = "StandbyPromoted", f"{message}: standby {standby.pod_name} promoted"
        elif waiting := [s for s in self.standbys if s.pod_name not in self.settled]:
            for late in waiting:  # it would hold this attempt's pod name
                self.delete(late, "a standby that cannot be promoted")
                self.settled.add(late.pod_name)
            return self._done(WAIT)
        else:
            placement = self.status.placement
            nodes = (
                tuple(placement.nodes)
                if placement and self.spec.local_recovery.enabled and restore_from == "latest-checkpoint"
                else ()
            )
            new_records = self.obs.graph is None
            self.actions.append(
                SubmitAttempt(attempt, restore_from, location, restore_batch, nodes, new_records)
            )
        self.update(
            attempt=attempt,
            checkpoint_directory=location,
            driver_pod=None,
            attempt_started_at=None,
            attempt_submitted_at=self.now,
            stop_requested_at=None,
            restarts=self.status.restarts.model_copy(update={"next_attempt_at": None}),
        )
        self.set_phase("Submitting", reason, message)
        self.condition("Progressing", "True", reason, message)
        ready = ready_condition(self.status.conditions)
        if ready is not None and ready.reason == QUOTA_EXCEEDED:  # the quota had room this time
            self.condition("Ready", "False", reason, message)
        return self._done(POLL)

    def _manual_restore_required(self, message: str) -> Decision:
        """Checkpoints exist but none is complete in storage: never a silent start from nothing. Failed with
        no result, so nothing starts until the user changes the spec (initialSavepoint, or stateless)."""
        self.update(phase="Failed")
        self.condition("Ready", "False", "InvalidSpec", message)
        self.actions.append(EmitEvent("Warning", "ManualRestoreRequired", message))
        return self._done()
