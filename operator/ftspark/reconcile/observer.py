"""The observe step: everything `decide` needs of one job, read from the API server and the stores (never
from a cache), each read made only where a decision can use it. The one exception: which nodes are being
drained comes from the node watch (a late word only delays a relocation, and a node read per pass would
cost a request for every running job's every look)."""

from __future__ import annotations

import logging
from dataclasses import replace

from ftspark.domain.ha import CheckpointPointer, JobGraph, JobKey, JobResultEntry
from ftspark.domain.lifecycle import DriverObservation, DriverPhase, Observation, SubmittedGraph, spec_hash
from ftspark.domain.models import JobSpec, JobStatus
from ftspark.domain.recovery import RestorePoint, choose_restore_point, folder_of, is_checkpoint_directory
from ftspark.domain.savepoints import SavepointData, manifest_job_uid, own_folder
from ftspark.manifests import ui_url
from ftspark.metrics import UNTRUSTED_POINTERS
from ftspark.ports.cluster import JobResource
from ftspark.ports.stores import (
    StoreUnavailableError,
    UntrustedRecordError,
)
from ftspark.protocol import SAVEPOINT_MANIFEST, spark_app_id
from ftspark.reconcile.driver_pods import presumed_lost
from ftspark.reconcile.settings import Ports

log = logging.getLogger(__name__)


def spark_apps(job: JobResource, attempts: tuple[int, ...]) -> frozenset[str]:
    """The Spark application ids of those attempts of the job."""
    return frozenset(spark_app_id(job.uid, attempt) for attempt in attempts)


class Observer:
    def __init__(self, ports: Ports) -> None:
        self._drivers, self._events, self._nodes = ports.drivers, ports.events, ports.nodes
        stores = ports.stores
        self._graphs, self._checkpoints, self._results = stores.job_graphs, stores.checkpoints, stores.results
        self._inspector, self._storage = ports.inspector, ports.storage

    def observe(self, job: JobResource, spec: JobSpec, status: JobStatus) -> Observation:
        """Everything `decide` needs, read from the API server and the stores (never from a cache)."""
        key = job.key
        stored = self._stored_graph(job)
        graph = SubmittedGraph(stored.uid, stored.spec_hash, stored.checkpoint_location) if stored else None
        own = stored if stored is not None and stored.uid == job.uid else None
        # Pods exist only of an attempt that was launched, and a launch writes the job graph before any pod:
        # a new job (no graph of its own, no attempt in its status) is spared the listings of its driver pods
        # and executors, which in a burst of new jobs each scan the whole namespace's pods. A pod that exists
        # all the same (a previous job's of the same name, not yet collected) is met at the create, which
        # takes it as made, and listed at the next look as it would have been at this one.
        launched = own is not None or status.attempt > 0
        asked = spec.driver.standby > 0
        drivers = tuple(self._placed(key, d, asked) for d in self._drivers.observe(key)) if launched else ()
        current = [d for d in drivers if d.attempt == status.attempt and not d.standby]
        running = [d for d in current if d.phase == DriverPhase.RUNNING]
        # Where the attempt's executors run, looked at while its driver runs and once more when it failed:
        # their pods stay until the driver's is deleted, so a driver killed before a first look still leaves
        # the next attempt its placement.
        placed = running or [d for d in current if d.phase == DriverPhase.FAILED]
        executor_nodes = (
            tuple(self._drivers.executor_nodes(key, spark_app_id(job.uid, status.attempt)))
            if spec.local_recovery.enabled and placed
            else ()
        )
        pointers = self._checkpoints.pointers(key) if own else []
        # A result is recorded once the current attempt's driver has ended or was given up on, and the job's
        # pods are deleted right after it: while that driver runs, there is no result to find. (One whose
        # deletions failed is found once the driver is gone; a new leader finishes such cleanups first.)
        # The read a running job is spared is one of every five its checkpoints wake it for. A result is
        # only ever the outcome of a launched attempt, so a new job is spared it too.
        result = None if running or not launched else self._result(job)
        # A submission is decided only when no driver pod exists (a standby is no driver yet) and the job has
        # no result: only then is S3 inspected.
        can_submit = all(d.standby for d in drivers) and result is None
        restore_point = self._restore_point(job, spec, own, pointers) if can_submit else None
        return Observation(
            job_uid=job.uid,
            generation=job.generation,
            spec_hash=spec_hash(spec),
            graph=graph,
            drivers=drivers,
            result=result,
            executor_nodes=executor_nodes,
            latest_checkpoint=pointers[0] if pointers else None,
            first_of_attempt=(
                min((p for p in pointers if p.attempt == pointers[0].attempt), key=lambda p: p.checkpoint_id)
                if pointers
                else None
            ),
            restore_point=restore_point,
            leftover_executors=(
                self._drivers.count_executors(
                    key, job.uid, besides=spark_apps(job, tuple(d.attempt for d in drivers if d.standby))
                )
                if can_submit and launched
                else 0
            ),
            disposing=self._disposing(job, spec, status),
            retired_present=self._retired_present(job, spec, status),
            ui_url=ui_url(key.namespace, key.name, spec),
        )

    def _placed(self, key: JobKey, driver: DriverObservation, standby_asked: bool) -> DriverObservation:
        """The driver with what the node watch knows of its node. A job that asked for a standby gives up
        on a driver on a silent node whose own Lease went unrenewed for its duration
        (driver_pods.presumed_lost), reading that Lease while the node is late (a renewal overdue, silent
        ones too): once per pass. One that asked for none waits for the node controller's verdict: the
        standby the silence makes is still warming its executors by then (docs/hot-standby.md)."""
        nodes, node = self._nodes, driver.node
        driver = replace(driver, node_draining=nodes.draining(node), node_silent=nodes.silent(node))
        if not standby_asked or not nodes.late(node):
            return driver
        lease = self._drivers.lease(key)
        if lease is None:
            return driver
        unchanged_for = self._nodes.lease_unchanged_for(key, lease.version, lease.duration)
        return presumed_lost(driver, lease, unchanged_for)

    def _retired_present(self, job: JobResource, spec: JobSpec, status: JobStatus) -> dict[str, bool]:
        """For each retired directory that is the job's: whether storage still holds anything in it."""
        found: dict[str, bool] = {}
        for directory in status.retired_checkpoint_directories:
            if not is_checkpoint_directory(directory, spec.checkpoint.storage, job.uid):
                continue
            try:
                found[directory] = self._storage.any_with_prefix(folder_of(directory))
            except StoreUnavailableError as error:
                log.warning(
                    "%s: checkpoint directory %s could not be looked at: %s", job.key, directory, error
                )
        return found

    def _disposing(self, job: JobResource, spec: JobSpec, status: JobStatus) -> dict[str, SavepointData]:
        """What storage holds of each savepoint being disposed of, read only at the job's own folder for it;
        one that cannot be read now is left out (the decision then waits for the next pass)."""
        found: dict[str, SavepointData] = {}
        for ref in status.savepoints:
            folder = own_folder(ref, spec.checkpoint.storage)
            if ref.id not in status.savepoints_disposing or folder is None:
                continue
            try:
                found[ref.id] = self._savepoint_data(job.uid, folder)
            except StoreUnavailableError as error:
                log.warning("%s: savepoint %s could not be looked at: %s", job.key, ref.id, error)
        return found

    def _savepoint_data(self, uid: str, folder: str) -> SavepointData:
        manifest = self._storage.get(folder + SAVEPOINT_MANIFEST)
        if manifest is not None:
            return SavepointData.OWN if manifest_job_uid(manifest) == uid else SavepointData.FOREIGN
        # No manifest: the savepoint's own deletion removes it last, so whatever is left is not of it.
        return SavepointData.FOREIGN if self._storage.any_with_prefix(folder) else SavepointData.GONE

    def _restore_point(
        self, job: JobResource, spec: JobSpec, graph: JobGraph | None, pointers: list[CheckpointPointer]
    ) -> RestorePoint:
        """Looks only inside a directory the operator chooses for this job: the job graph's, if it is one (the
        record is the tenant's to edit)."""
        directory = graph.checkpoint_location if graph else None
        if directory is not None and not is_checkpoint_directory(directory, spec.checkpoint.storage, job.uid):
            log.warning(
                "%s: the job graph's checkpoint directory %s was not chosen for it", job.key, directory
            )
            directory = None
        point = choose_restore_point(pointers, self._inspector.committed, directory)
        if point.outside:
            UNTRUSTED_POINTERS.labels(pointer="checkpoint").inc(len(point.outside))
            log.warning("%s: %s", job.key, point.why_skipped)
        return point

    def _result(self, job: JobResource) -> JobResultEntry | None:
        """The job's result; one the operator did not write counts as none (it would end the job for good)."""
        try:
            return self._results.get(job.uid)
        except UntrustedRecordError as error:
            log.warning("%s: %s", job.key, error)
            self._events.emit(job, "Warning", "UntrustedJobResult", f"{error}; ignored")
            return None

    def _stored_graph(self, job: JobResource) -> JobGraph | None:
        """The job graph; one whose record points at what the operator did not write counts as none (the
        job then starts without state, StateNotFound), and the next submission replaces it."""
        try:
            return self._graphs.get(job.key)
        except UntrustedRecordError as error:
            log.warning("%s: %s", job.key, error)
            self._events.emit(
                job, "Warning", "UntrustedJobGraph", f"{error}; ignored, nothing it names is deleted"
            )
            return None
