"""The reconciler (observe → decide → act → record) over the in-memory cluster port and HA stores: what each
reconcile reads, creates, deletes and writes, in milliseconds. The same paths against a real API server, S3
and Spark are in tests/integration and e2e."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kubernetes import client
from prometheus_client import REGISTRY

from ftspark.adapters.records import JOBGRAPH_POINTER, RecordId
from ftspark.app import controller as controller_module
from ftspark.app.controller import Controller
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, DriverStart, JobGraph, JobKey, JobResultEntry
from ftspark.domain.lifecycle import OPERATOR_ERROR, DriverPhase, SavepointReport
from ftspark.domain.models import BatchFigures, Condition, JobSpec, JobStatus, RecoveryPhases
from ftspark.domain.policy import STORAGE_PREFIXES_ANNOTATION, Allowance, outside_storage
from ftspark.ports.cluster import JobResource, NamespaceMetadata, StaleReadError
from ftspark.ports.stores import HaStores, StoreUnavailableError
from ftspark.protocol import (
    EXECUTORS_NOT_STARTED,
    NO_PROGRESS,
    Exit,
    HaStoreConfig,
    driver_pod_name,
    spark_app_id,
)
from ftspark.reconcile.reconciler import Reconciler
from ftspark.reconcile.settings import DriverSettings, JobDefaults, JobPolicy, Ports, ResultLimits
from ftspark.testing.cluster import MemoryDriverLogs, MemoryDrivers, MemoryEvents, MemoryJobs, MemoryNodes
from ftspark.testing.stores import MemoryBlobStore, MemoryRecords, memory_stores
from tests.waiting import eventually

KEY = JobKey(namespace="team-a", name="counts")
UID = "0123abcd-0000-4000-8000-000000000001"
SPEC: dict[str, Any] = {
    "image": "img",
    "mainApplicationFile": "local:///job.py",
    "checkpoint": {"storage": "s3://bucket/counts"},
    "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 3, "delaySeconds": 5}},
}
LEADER = Epoch("operator", 1, "leader-0")
TERM_FLOOR = "ftspark-system/ftspark-operator-term"


class NotLeadingError(Exception):
    """What the composition root's epoch raises once the Lease is lost."""


@dataclass
class Inspector:
    """Which checkpoints are complete in storage (by checkpoint id); the real one HEADs commits/<batch>."""

    missing: set[int] = field(default_factory=set)
    inspected: list[str] = field(default_factory=list)
    error: Exception | None = None  # what storage answers every look with, if set

    def committed(self, pointer: CheckpointPointer) -> bool:
        if self.error is not None:
            raise self.error
        self.inspected.append(pointer.location)
        return pointer.checkpoint_id not in self.missing


@dataclass
class Cluster:
    jobs: MemoryJobs = field(default_factory=MemoryJobs)
    drivers: MemoryDrivers = field(default_factory=MemoryDrivers)
    events: MemoryEvents = field(default_factory=MemoryEvents)
    stores: HaStores = field(default_factory=memory_stores)
    inspector: Inspector = field(default_factory=Inspector)
    storage: MemoryBlobStore = field(default_factory=MemoryBlobStore)
    logs: MemoryDriverLogs = field(default_factory=MemoryDriverLogs)
    nodes: MemoryNodes = field(default_factory=MemoryNodes)
    now: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    ha_store: HaStoreConfig = field(default_factory=HaStoreConfig)
    allowed: frozenset[Allowance] = frozenset()
    storage_prefixes: tuple[str, ...] = ()
    own_namespace: str = "ftspark-system"
    leading: bool = True
    max_retention: int = 30 * 24 * 3600
    max_results: int = 1000
    defaults: JobDefaults = field(default_factory=JobDefaults)

    def __post_init__(self) -> None:
        ports = Ports(
            self.jobs,
            self.drivers,
            self.events,
            self.stores,
            self.inspector,
            self.storage,
            self.logs,
            self.nodes,
        )
        self.reconciler = Reconciler(
            ports,
            self.epoch,
            DriverSettings(TERM_FLOOR, self.ha_store),
            policy=JobPolicy(self.allowed, self.storage_prefixes, self.own_namespace),
            limits=ResultLimits(self.max_retention, self.max_results),
            defaults=self.defaults,
            clock=lambda: self.now,
            uniform=lambda: 0.5,
        )

    def epoch(self) -> Epoch:
        if not self.leading:
            raise NotLeadingError("deposed")
        return LEADER

    def reconcile(self, *, after: float = 0.0) -> float | None:
        self.now += timedelta(seconds=after)
        return self.reconciler.reconcile(KEY).after

    def status(self) -> JobStatus:
        job = self.jobs.get(KEY)
        assert job is not None
        return JobStatus.model_validate(job.status)

    def commit(
        self, attempt: int, checkpoint_id: int, location: str = "", *, start: DriverStart | None = None
    ) -> None:
        """The attempt's driver records a completed checkpoint, as the runtime does (by default in the job's
        checkpoint directory)."""
        graph = self.stores.job_graphs.get(KEY)
        assert graph is not None
        pointer = CheckpointPointer(
            checkpoint_id=checkpoint_id,
            batch_id=checkpoint_id,
            location=location or f"{graph.checkpoint_location}/query-0",
            completed_at=self.now,
            attempt=attempt,
            figures=BatchFigures(duration_ms=checkpoint_id * 100, input_rows=checkpoint_id),
            start=start,
        )
        driver = Epoch("driver", attempt, driver_pod_name(KEY.name, attempt))
        self.stores.checkpoints.add(KEY, pointer, driver, retained=5)

    def running(self, attempt: int = 1) -> None:
        self.drivers.set_driver(KEY, attempt, DriverPhase.RUNNING, started_at=self.now)
        self.reconcile()

    def fail(self, attempt: int = 1) -> None:
        self.drivers.set_driver(KEY, attempt, DriverPhase.FAILED, exit_code=1, message="boom")
        self.reconcile()
        self.drivers.pods.pop(KEY, None)  # the deleted pod is gone


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


def run_dir(uid: str, attempt: int) -> str:
    return f"s3://bucket/counts/checkpoints/{uid[:8]}-run-{attempt}"


def test_the_first_reconcile_persists_the_graph_then_creates_attempt_one(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    (plan,) = cluster.drivers.plans
    assert (plan.attempt, plan.restore_from, plan.checkpoint_location) == (1, "nothing", run_dir(UID, 1))
    graph = cluster.stores.job_graphs.get(KEY)
    assert graph is not None
    assert (graph.uid, graph.checkpoint_location) == (UID, run_dir(UID, 1))
    assert (cluster.status().phase, cluster.status().attempt) == ("Submitting", 1)
    assert cluster.events.reasons() == ["Submitted"]


def test_a_new_job_is_spared_the_pod_listings_a_restart_pays(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    listings = (cluster.drivers.driver_listings, cluster.drivers.executor_listings)
    assert listings == (0, 0), "nothing was launched before, so no pod of it exists"
    cluster.running()
    cluster.fail()
    before = cluster.drivers.driver_listings
    cluster.reconcile(after=5)
    assert cluster.drivers.driver_listings == before + 1
    assert cluster.drivers.executor_listings == 1
    assert [plan.attempt for plan in cluster.drivers.plans] == [1, 2]


def test_the_echo_of_its_own_status_write_is_recognised_once_and_nothing_else_is(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    job = cluster.jobs.get(KEY)
    assert job is not None and cluster.jobs.status_writes == 1
    assert not cluster.reconciler.is_own_write(KEY, str(int(job.resource_version) - 1)), "the user's create"
    assert not cluster.reconciler.is_own_write(
        JobKey(namespace="team-b", name=KEY.name), job.resource_version
    )
    assert cluster.reconciler.is_own_write(KEY, job.resource_version)
    assert not cluster.reconciler.is_own_write(KEY, job.resource_version), "one echo per write"
    edited = cluster.jobs.apply(KEY, {**SPEC, "image": "img:2"}, uid=UID)
    assert not cluster.reconciler.is_own_write(KEY, edited.resource_version), "a user's edit wakes its job"


class HeldStatusWrites(MemoryJobs):
    """Status writes that wait until released, as a slow API server answers: the watch event of the write
    can arrive before its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.writing, self.release = threading.Event(), threading.Event()

    def write_status(self, job: JobResource, status: dict[str, Any]) -> str:
        self.writing.set()
        assert self.release.wait(10), "released"
        return super().write_status(job, status)


def test_an_echo_that_overtakes_its_writes_answer_is_still_recognised() -> None:
    jobs = HeldStatusWrites()
    cluster = Cluster(jobs=jobs)
    job = jobs.apply(KEY, SPEC, uid=UID)
    writer = threading.Thread(target=cluster.reconcile)
    writer.start()
    assert jobs.writing.wait(10)
    echo = str(int(job.resource_version) + 1)  # the version the held write makes
    answers: list[bool] = []
    checker = threading.Thread(target=lambda: answers.append(cluster.reconciler.is_own_write(KEY, echo)))
    checker.start()
    checker.join(0.2)
    assert checker.is_alive() and not answers, "the check waits for the write in flight"
    jobs.release.set()
    writer.join(10)
    checker.join(10)
    assert answers == [True]


def test_the_result_store_is_read_unless_the_current_attempt_runs_or_none_was_launched() -> None:
    records = MemoryRecords()
    cluster = Cluster(stores=memory_stores(records))
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    assert records.reads["result"] == 0, "a new job: only a launched attempt leaves a result"
    cluster.running()
    before = records.reads["result"]
    cluster.commit(1, 1)
    cluster.reconcile(after=5)
    assert records.reads["result"] == before, "attempt 1 runs: no result can exist, none is read"
    cluster.drivers.set_driver(KEY, 1, DriverPhase.SUCCEEDED, exit_code=0)
    cluster.reconcile(after=1)
    assert records.reads["result"] > before, "it ended: the result is looked for, then recorded"
    assert cluster.stores.results.get(UID) is not None
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Succeeded"


def test_status_is_written_only_when_it_changes(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    writes = cluster.jobs.status_writes
    for _ in range(3):
        cluster.reconcile(after=1)
    assert cluster.jobs.status_writes == writes
    assert cluster.status().phase == "Running"


def test_a_restart_restores_the_newest_complete_checkpoint_and_names_the_skipped_ones(
    cluster: Cluster,
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    for checkpoint_id in (3, 4, 5):
        cluster.commit(1, checkpoint_id)
    cluster.inspector.missing = {5}  # the newest pointer's commit file is not in storage
    cluster.fail()
    assert cluster.status().phase == "Restarting"
    cluster.reconcile(after=5)
    restart = cluster.drivers.plans[-1]
    assert (restart.attempt, restart.restore_from, restart.restore_batch_id) == (2, "latest-checkpoint", 4)
    assert restart.checkpoint_location == run_dir(UID, 1), "the same directory, so Spark resumes from it"
    assert "CheckpointSkipped" in cluster.events.reasons()
    latest = cluster.status().latest_checkpoint
    assert latest is not None
    assert latest.id == 5
    assert latest.figures == BatchFigures(duration_ms=500, input_rows=5), "the batch's figures, as reported"


def test_no_complete_checkpoint_asks_for_a_manual_restore_and_starts_nothing(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 7)
    cluster.inspector.missing = {7}
    cluster.fail()
    cluster.reconcile(after=5)
    assert len(cluster.drivers.plans) == 1
    status = cluster.status()
    assert status.phase == "Failed"
    assert status.result is None, "not final: the user can fix it"
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert "manual restore required" in ready.message
    assert cluster.events.reasons()[-1] == "ManualRestoreRequired"
    cluster.reconcile(after=60)
    assert len(cluster.drivers.plans) == 1, "nothing starts until the spec changes"

    cluster.jobs.apply(KEY, {**SPEC, "upgradeMode": "stateless"}, uid=UID)
    cluster.reconcile()  # the run it leaves behind goes into the status first
    cluster.reconcile()
    restart = cluster.drivers.plans[-1]
    assert (restart.attempt, restart.restore_from) == (2, "nothing")
    assert restart.checkpoint_location == run_dir(UID, 2), "stateless: a new directory"


@pytest.mark.parametrize("rollback", [False, True])
def test_a_stateless_upgrade_deletes_the_earlier_runs_directory_once_the_new_run_is_running(
    cluster: Cluster, rollback: bool
) -> None:
    guard = {"upgradeRollback": {"enabled": True, "windowSeconds": 60}} if rollback else {}
    cluster.jobs.apply(KEY, {**SPEC, **guard}, uid=UID)
    cluster.reconcile()
    cluster.running()
    old, foreign = run_dir(UID, 1), run_dir("ffffffff-another-job", 1)
    for uri in (f"{old}/query-0/commits/0", f"{old}/query-0/offsets/0", f"{foreign}/query-0/commits/0"):
        cluster.storage.put(uri, b"x")
    cluster.jobs.apply(KEY, {**SPEC, **guard, "upgradeMode": "stateless", "arguments": ["--v2"]}, uid=UID)
    cluster.reconcile()  # the running driver goes
    cluster.drivers.pods.pop(KEY, None)
    cluster.reconcile()
    assert cluster.status().retired_checkpoint_directories == [old]
    assert len(cluster.drivers.plans) == 1, "recorded before the new run starts"
    cluster.reconcile()
    assert cluster.drivers.plans[-1].checkpoint_location == run_dir(UID, 2)
    assert cluster.status().retired_checkpoint_directories == [old]
    # A hostile status names another job's directory too: never deleted, only dropped.
    job = cluster.jobs.get(KEY)
    assert job is not None
    cluster.jobs.write_status(job, {**job.status, "retiredCheckpointDirectories": [old, foreign]})
    cluster.reconcile()
    assert cluster.storage.any_with_prefix(old + "/"), "not before the new run is running"
    cluster.running(attempt=2)
    if rollback:
        assert cluster.storage.any_with_prefix(old + "/"), "a rollback within the window may want it"
        cluster.reconcile(after=60)
    cluster.reconcile()
    assert not cluster.storage.any_with_prefix(old + "/")
    assert cluster.storage.get(f"{foreign}/query-0/commits/0") == b"x"
    cluster.reconcile()
    assert cluster.status().retired_checkpoint_directories == []
    assert "CheckpointDirectoryDeleted" in cluster.events.reasons()


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_job_whose_ha_records_were_deleted_resumes_from_the_directory_its_status_names(
    cluster: Cluster, checkpointed: bool
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    if checkpointed:
        cluster.commit(1, 7, f"s3a://bucket/counts/checkpoints/{UID[:8]}-run-1/query-0")  # as Spark names it
        cluster.reconcile()
    cluster.stores.checkpoints.delete(KEY, LEADER)  # both records deleted by hand
    cluster.stores.job_graphs.delete(KEY, LEADER)
    cluster.fail()
    cluster.reconcile(after=5)
    restart = cluster.drivers.plans[-1]
    assert (restart.attempt, restart.restore_from, restart.restore_batch_id) == (2, "latest-checkpoint", None)
    assert restart.checkpoint_location == run_dir(UID, 1)
    assert "JobGraphRecovered" in cluster.events.reasons()


@pytest.mark.parametrize(
    "directory",
    [
        "s3://bucket/counts/checkpoints/ffffffff-run-1",  # another job's
        "s3://other-bucket/checkpoints/x",  # outside the job's storage
        f"s3://bucket/counts/checkpoints/{UID[:8]}-run-1/../../x",
    ],
)
def test_a_directory_in_the_status_the_operator_did_not_choose_is_ignored(
    cluster: Cluster, directory: str
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.stores.job_graphs.delete(KEY, LEADER)
    job = cluster.jobs.get(KEY)
    assert job is not None
    cluster.jobs.write_status(
        job, {**job.status, "checkpointDirectory": directory}
    )  # written by someone else
    cluster.fail()
    cluster.reconcile(after=5)
    restart = cluster.drivers.plans[-1]
    assert (restart.restore_from, restart.checkpoint_location) == ("nothing", run_dir(UID, 2))
    assert "StateNotFound" in cluster.events.reasons()


def test_a_deleted_jobs_records_are_discarded_before_a_new_job_of_the_same_name_starts(
    cluster: Cluster,
) -> None:
    old = JobGraph(
        job=KEY,
        uid="ffffeeee-old",
        generation=4,
        spec_hash="x",
        spec=JobSpec.model_validate(SPEC),
        checkpoint_location=run_dir("ffffeeee-old", 1),
        submitted_at=cluster.now,
    )
    cluster.stores.job_graphs.put(old, LEADER)
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    (plan,) = cluster.drivers.plans
    assert (plan.restore_from, plan.checkpoint_location) == ("nothing", run_dir(UID, 1))
    graph = cluster.stores.job_graphs.get(KEY)
    assert graph is not None
    assert graph.uid == UID


def test_an_object_the_api_server_refuses_leaves_no_attempt_and_is_reported_once(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.drivers.refuse("Pod")
    assert cluster.reconcile() is None, "no retry until the spec changes"
    assert cluster.drivers.plans == []
    status = cluster.status()
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert "refused the driver's Pod" in ready.message
    assert status.attempt == 0
    cluster.drivers.refuse("Pod")
    cluster.reconcile()
    assert cluster.events.reasons() == ["InvalidSpec"], "said once"


def test_an_invalid_spec_names_the_field_and_creates_nothing(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "checkpoint": {"storage": "/tmp/x"}}, uid=UID)
    assert cluster.reconcile() is None
    assert cluster.drivers.plans == []
    ready = next(c for c in cluster.status().conditions if c.type == "Ready")
    assert ready.reason == "InvalidSpec"
    assert "spec.checkpoint.storage" in ready.message


def test_a_finished_driver_records_a_clean_result_and_never_runs_again(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "resultStore": {"ttlSeconds": 60}}, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.drivers.set_driver(KEY, 1, DriverPhase.SUCCEEDED, exit_code=0, ended=True)
    cluster.reconcile(after=3)
    result = cluster.stores.results.get(UID)
    assert result is not None
    assert (result.state, result.clean, result.retain_seconds) == ("Succeeded", True, 60)
    assert KEY not in cluster.drivers.pods, "its pods were cleaned up"
    assert cluster.logs.kept == {KEY: {1: "counts-1-driver"}}, "its log was kept before"
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Succeeded"
    assert len(cluster.drivers.plans) == 1


def _finish(cluster: Cluster, spec: dict[str, Any]) -> datetime:
    """The job runs attempt 1 to exit code 0 and records its result; when it ended."""
    cluster.jobs.apply(KEY, spec, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.drivers.set_driver(KEY, 1, DriverPhase.SUCCEEDED, exit_code=0, ended=True)
    cluster.reconcile(after=3)
    ended = cluster.now
    cluster.reconcile()
    result = cluster.stores.results.get(UID)
    assert result is not None and result.clean
    return ended


def test_a_finished_job_is_deleted_once_its_ttl_after_finished_has_passed(cluster: Cluster) -> None:
    ended = _finish(cluster, {**SPEC, "ttlSecondsAfterFinished": 600})
    assert cluster.status().phase == "Succeeded"
    assert cluster.reconcile(after=100) == pytest.approx(500), "looked at again when the time is up"
    assert cluster.jobs.get(KEY) is not None
    writes = cluster.jobs.status_writes
    assert cluster.reconcile(after=500) is None
    assert cluster.jobs.get(KEY) is None, f"deleted {cluster.now - ended} after it ended"
    assert cluster.jobs.status_writes == writes, "a deleted job's status is not written"
    assert cluster.events.reasons()[-1] == "FinishedJobDeleted"
    result = cluster.stores.results.get(UID)
    assert result is not None and result.state == "Succeeded", "its result follows its own retention"


def test_a_finished_job_stays_without_a_ttl_and_takes_the_installations_default() -> None:
    kept = Cluster()
    _finish(kept, SPEC)
    assert kept.reconcile(after=365 * 24 * 3600) is None
    assert kept.jobs.get(KEY) is not None, "no ttlSecondsAfterFinished, no default: it stays"
    defaulted = Cluster(defaults=JobDefaults(ttl_seconds_after_finished=0))
    _finish(defaulted, SPEC)
    assert defaulted.jobs.get(KEY) is None, "the installation's default: at once"
    own = Cluster(defaults=JobDefaults(ttl_seconds_after_finished=0))
    _finish(own, {**SPEC, "ttlSecondsAfterFinished": 60})
    assert own.jobs.get(KEY) is not None, "the spec's own value wins over the default"


def test_a_log_that_cannot_be_kept_is_an_event_and_holds_up_nothing(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "failureHistory": 2}, uid=UID)
    cluster.reconcile()
    for attempt in (1, 2, 3, 4):
        cluster.running(attempt)
        cluster.drivers.set_driver(KEY, attempt, DriverPhase.FAILED, exit_code=1, ended=True)
        cluster.reconcile(after=1)  # Restarting
        if attempt == 2:
            cluster.logs.refusal = "ConfigMap team-a/counts-driver-logs exists and is not this job's"
        cluster.reconcile(after=10)  # its log kept, its pod deleted
        cluster.reconcile(after=10)  # the next attempt submitted
    assert cluster.logs.kept == {KEY: {3: "counts-3-driver", 4: "counts-4-driver"}}, "the newest 2"
    assert ("counts-2-driver", True) in cluster.drivers.deleted  # ended: removed at once
    assert cluster.events.reasons().count("DriverLogNotKept") == 1
    assert [plan.attempt for plan in cluster.drivers.plans][:4] == [1, 2, 3, 4], "the next went on"


def test_local_recovery_sends_the_next_attempt_to_the_executors_nodes(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "localRecovery": {"enabled": True}}, uid=UID)
    cluster.reconcile()
    cluster.drivers.executors[spark_app_id(UID, 1)] = ["node-b", "node-a"]
    cluster.running()
    cluster.commit(1, 0)
    cluster.fail()
    cluster.reconcile(after=5)
    assert cluster.drivers.plans[-1].local_state_nodes == ("node-a", "node-b")


def test_a_driver_killed_before_a_look_at_its_executors_still_leaves_their_nodes(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "localRecovery": {"enabled": True}}, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 0)
    assert cluster.status().placement is None, "no executor yet at the operator's last look"
    cluster.drivers.executors[spark_app_id(UID, 1)] = ["node-c"]  # then one ran, and the driver was killed
    cluster.fail()
    cluster.reconcile(after=5)
    assert cluster.drivers.plans[-1].local_state_nodes == ("node-c",)


def test_a_deleted_job_leaves_no_ha_records(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 0)
    cluster.jobs.delete(KEY)
    cluster.reconcile()
    assert cluster.stores.job_graphs.get(KEY) is None
    assert cluster.stores.checkpoints.pointers(KEY) == []


def test_a_checkpoint_pointer_outside_the_jobs_directory_is_skipped_without_a_look(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 4)
    cluster.commit(1, 5, location="s3://victim-bucket/private/q")  # the tenant's code wrote it
    cluster.fail()
    cluster.reconcile(after=5)
    assert cluster.drivers.plans[-1].restore_batch_id == 4
    assert cluster.inspector.inspected == [f"{run_dir(UID, 1)}/query-0"]
    (skipped,) = (e.message for e in cluster.events.emitted if e.reason == "CheckpointSkipped")
    assert skipped == "unusable checkpoints [5]: [5] outside the job's checkpoint directory"


def test_a_job_graph_naming_a_directory_the_operator_did_not_choose_gets_nothing_inspected(
    cluster: Cluster,
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    graph = cluster.stores.job_graphs.get(KEY)
    assert graph is not None
    # The tenant rewrites its (inline) job graph: its own uid, another tenant's directory, pointers into it.
    forged = graph.model_copy(update={"checkpoint_location": "s3://victim-bucket/private"})
    cluster.stores.job_graphs.put(forged, LEADER)
    cluster.commit(1, 4, location="s3://victim-bucket/private/q")
    cluster.fail()
    cluster.reconcile(after=5)
    assert cluster.inspector.inspected == []
    assert cluster.events.reasons()[-1] == "ManualRestoreRequired"


def test_a_job_graph_pointing_at_a_foreign_object_is_ignored_and_the_object_never_deleted() -> None:
    records, blobs = MemoryRecords(), MemoryBlobStore()
    cluster = Cluster(stores=memory_stores(records, blobs, payload_threshold=0))  # every graph is a payload
    victim = "s3://victim-bucket/data/important.parquet"
    blobs.put(victim, b"PAR1")
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    (original,) = blobs.objects.keys() - {victim}
    rid = RecordId.of_job("jobgraph", KEY)
    record = records.read(rid)
    assert record is not None
    records.replace(rid, {JOBGRAPH_POINTER: victim}, record.fences, "tenant", record.version)

    cluster.reconcile(after=1)
    (warning,) = (e for e in cluster.events.emitted if e.reason == "UntrustedJobGraph")
    assert warning.type == "Warning" and "does not carry this operator's seal" in warning.message
    cluster.jobs.delete(KEY)
    cluster.reconcile()
    assert cluster.stores.job_graphs.get(KEY) is None
    # The edited record no longer named the original payload: nothing finds it any more, so it stays.
    assert blobs.objects.keys() == {victim, original}


def test_one_job_whose_records_cannot_be_forgotten_does_not_stop_the_sweep(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = JobGraph(
        job=KEY,
        uid=UID,
        generation=1,
        spec_hash="x",
        spec=JobSpec.model_validate(SPEC),
        checkpoint_location=run_dir(UID, 1),
        submitted_at=cluster.now,
    )
    broken = JobKey(namespace="team-a", name="broken")
    for job in (broken, KEY):
        cluster.stores.job_graphs.put(graph.model_copy(update={"job": job}), LEADER)
    delete = cluster.stores.checkpoints.delete

    def failing_for_broken(job: JobKey, epoch: Epoch) -> None:
        if job == broken:
            raise ValueError("unreadable record")
        delete(job, epoch)

    monkeypatch.setattr(cluster.stores.checkpoints, "delete", failing_for_broken)
    assert cluster.reconciler.sweeper.forget_orphans() == 1
    assert cluster.stores.job_graphs.jobs() == [broken]


def test_local_state_volumes_go_once_their_job_is_gone(cluster: Cluster) -> None:
    """Cluster-scoped, no owner reference takes them with the job: the sweep deletes a deleted job's and a
    re-created job's predecessor's, never a live job's."""
    cluster.jobs.apply(KEY, {**SPEC, "localRecovery": {"enabled": True}}, uid=UID)
    cluster.reconcile()
    deleted, recreated = JobKey(namespace="team-a", name="gone"), JobKey(namespace="team-b", name="again")
    cluster.drivers.local_state.update({"uid-gone": deleted, "uid-before": recreated})
    cluster.jobs.apply(recreated, SPEC, uid="uid-after")
    assert cluster.reconciler.sweeper.delete_orphan_volumes() == 2
    assert cluster.drivers.local_state_volumes() == [(KEY, UID)]
    cluster.jobs.delete(KEY)
    assert cluster.reconciler.sweeper.delete_orphan_volumes() == 1
    assert cluster.drivers.local_state_volumes() == []


def test_drivers_are_told_the_installations_ha_store() -> None:
    on_s3 = Cluster(ha_store=HaStoreConfig(kind="s3", s3_root="s3://ha-bucket/ftspark"))
    on_s3.jobs.apply(KEY, SPEC, uid=UID)
    on_s3.reconcile()
    assert on_s3.drivers.plans[0].ha_store == on_s3.ha_store


HOST_NETWORK: dict[str, Any] = {**SPEC, "driver": {"podTemplate": {"spec": {"hostNetwork": True}}}}


def test_a_field_the_job_policy_refuses_is_named_and_nothing_is_created(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, HOST_NETWORK, uid=UID)
    assert cluster.reconcile() is None, "no retry until the spec or the namespace changes"
    assert cluster.drivers.plans == []
    assert cluster.stores.job_graphs.get(KEY) is None
    ready = next(c for c in cluster.status().conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert ready.message.startswith("spec.driver.podTemplate.spec.hostNetwork: ")
    assert "allow.ftspark.io/hostNetwork=true" in ready.message
    cluster.reconcile()
    assert cluster.events.reasons() == ["InvalidSpec"], "said once"


def test_a_namespace_label_grants_an_allowance_there_only(cluster: Cluster) -> None:
    cluster.jobs.namespaces["team-b"] = NamespaceMetadata(labels={"allow.ftspark.io/hostNetwork": "true"})
    cluster.jobs.apply(KEY, HOST_NETWORK, uid=UID)
    cluster.reconcile()
    assert cluster.drivers.plans == []
    cluster.jobs.namespaces[KEY.namespace] = NamespaceMetadata(
        labels={"allow.ftspark.io/hostNetwork": "true"}
    )
    cluster.reconcile()
    (plan,) = cluster.drivers.plans
    assert plan.spec.driver.pod_template == {"spec": {"hostNetwork": True}}


def test_storage_outside_the_admins_prefixes_is_refused_unless_its_namespace_is_granted_it() -> None:
    """The operator's own S3 credentials act under a job's storage (payloads, commits, savepoints): with an
    allow-list, a job's storage elsewhere is an invalid spec, with no pod and no byte written there."""
    cluster = Cluster(storage_prefixes=("s3://bucket/team-a",))
    cluster.jobs.apply(KEY, SPEC, uid=UID)  # its storage: s3://bucket/counts
    cluster.reconcile()
    assert cluster.drivers.plans == [] and cluster.stores.job_graphs.get(KEY) is None
    ready = next(c for c in cluster.status().conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert "spec.checkpoint.storage: s3://bucket/counts is outside" in ready.message
    annotated = {STORAGE_PREFIXES_ANNOTATION: "s3://other/x, s3a://bucket/counts"}
    cluster.jobs.namespaces["team-b"] = NamespaceMetadata(annotations=annotated)
    cluster.reconcile()
    assert cluster.drivers.plans == [], "another namespace's grant is not this one's"
    cluster.jobs.namespaces[KEY.namespace] = NamespaceMetadata(annotations=annotated)
    cluster.reconcile()
    assert len(cluster.drivers.plans) == 1
    within = Cluster(storage_prefixes=("s3://bucket/",))
    within.jobs.apply(KEY, SPEC, uid=UID)
    within.reconcile()
    assert len(within.drivers.plans) == 1 and within.jobs.namespace_reads == 0
    assert outside_storage(
        JobSpec.model_validate({**SPEC, "checkpoint": {"storage": "s3://bucket/counts-x"}}),
        ("s3://bucket/counts",),
    )


def test_a_job_in_the_operators_own_namespace_never_runs() -> None:
    """Cluster-wide, the operator watches its own namespace too, where a driver's Role would reach its Lease,
    results and record key: such a job is an invalid spec, said once, and nothing of it is made."""
    cluster = Cluster(own_namespace=KEY.namespace)
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    assert cluster.reconcile() is None
    assert cluster.drivers.plans == [] and cluster.stores.job_graphs.get(KEY) is None
    ready = next(c for c in cluster.status().conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert f"the operator's own namespace {KEY.namespace} runs no jobs" in ready.message
    cluster.reconcile()
    assert cluster.events.reasons() == ["InvalidSpec"]


def test_the_installation_grants_allowances_everywhere_and_a_plain_job_reads_no_namespace() -> None:
    cluster = Cluster(allowed=frozenset({"hostNetwork"}))
    cluster.jobs.apply(KEY, HOST_NETWORK, uid=UID)
    cluster.reconcile()
    assert len(cluster.drivers.plans) == 1
    assert cluster.jobs.namespace_reads == 0


def test_local_recovery_at_its_default_directory_needs_no_allowance(cluster: Cluster) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "localRecovery": {"enabled": True}}, uid=UID)
    cluster.reconcile()
    assert len(cluster.drivers.plans) == 1
    assert cluster.jobs.namespace_reads == 0


def test_a_status_decided_on_a_stale_read_or_after_leadership_is_lost_is_not_written(
    cluster: Cluster,
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.drivers.set_driver(KEY, 1, DriverPhase.RUNNING, started_at=cluster.now)
    read = cluster.jobs.get

    def then_changed(key: JobKey) -> JobResource | None:
        job = read(key)
        cluster.jobs.apply(KEY, {**SPEC, "arguments": ["v2"]}, uid=UID)  # a user's edit meanwhile
        return job

    cluster.jobs.get = then_changed  # type: ignore[method-assign]
    with pytest.raises(StaleReadError):
        cluster.reconcile()
    cluster.jobs.get = read  # type: ignore[method-assign]
    assert cluster.status().phase == "Submitting", "the stale decision (Running) was not written"

    cluster.leading = False
    with pytest.raises(NotLeadingError):
        cluster.reconcile()
    assert cluster.status().phase == "Submitting"


def test_a_control_request_carries_the_leaders_term_and_a_deposed_leader_writes_none(
    cluster: Cluster,
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.jobs.apply(KEY, {**SPEC, "desiredState": "stopped"}, uid=UID)
    cluster.leading = False
    with pytest.raises(NotLeadingError):
        cluster.reconcile()
    assert cluster.drivers.controls == [], "the epoch is checked right before the request is written"
    cluster.leading = True
    cluster.reconcile()
    assert cluster.drivers.controls == [(driver_pod_name(KEY.name, 1), "stop")]
    assert cluster.drivers.control_terms == [LEADER.term]
    assert cluster.drivers.plans[0].term_floor == TERM_FLOOR, "the driver learns where the floor is"


def test_executors_an_attempt_left_behind_are_deleted_before_the_next_attempt_starts(
    cluster: Cluster,
) -> None:
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    # The driver pod is gone; the garbage collector not there yet.
    cluster.drivers.executor_pods[spark_app_id(UID, 1)] = 2
    cluster.drivers.executor_pods[spark_app_id("another-job-uid", 1)] = 1
    cluster.fail()
    cluster.reconcile(after=5)
    cluster.reconcile(after=1)
    assert len(cluster.drivers.plans) == 1, "no attempt 2 while an executor of attempt 1 exists"
    assert cluster.drivers.executor_deletions == [(UID, frozenset()), (UID, frozenset())]
    del cluster.drivers.executor_pods[spark_app_id(UID, 1)]
    cluster.reconcile(after=1)
    assert [plan.attempt for plan in cluster.drivers.plans] == [1, 2]


def finished(cluster: Cluster, name: str, *, days_ago: float, ttl: int, namespace: str = "team-a") -> str:
    """A clean result of a finished job; returns its uid."""
    uid = f"uid-{namespace}-{name}"
    entry = JobResultEntry(
        job=JobKey(namespace=namespace, name=name),
        uid=uid,
        state="Succeeded",
        finished_at=cluster.now - timedelta(days=days_ago),
        retain_seconds=ttl,
    )
    cluster.stores.results.create_dirty(entry, LEADER)
    cluster.stores.results.mark_clean(uid, LEADER)
    return uid


def kept(cluster: Cluster) -> list[str]:
    return sorted(entry.uid for entry in cluster.stores.results.entries())


def test_no_result_outlives_the_operators_maximum_retention_unless_its_job_still_exists() -> None:
    cluster = Cluster(max_retention=10 * 24 * 3600)
    forever = finished(cluster, "forever", days_ago=11, ttl=0)  # ttlSeconds 0: "forever"
    long = finished(cluster, "long", days_ago=11, ttl=365 * 24 * 3600)
    recent = finished(cluster, "recent", days_ago=9, ttl=0)
    short = finished(cluster, "short", days_ago=2, ttl=24 * 3600)
    still_there = finished(cluster, "still-there", days_ago=20, ttl=0)
    cluster.jobs.apply(JobKey(namespace="team-a", name="still-there"), SPEC, uid=still_there)
    assert cluster.reconciler.sweeper.expire_results() == 3
    assert kept(cluster) == sorted([recent, still_there])
    assert {forever, long, short}.isdisjoint(kept(cluster))


def test_a_namespace_keeps_at_most_the_cap_and_loses_its_oldest_results_first() -> None:
    cluster = Cluster(max_results=2)
    oldest = finished(cluster, "a", days_ago=5, ttl=0)
    running_again = finished(cluster, "b", days_ago=4, ttl=0)  # its job resource exists: never deleted
    cluster.jobs.apply(JobKey(namespace="team-a", name="b"), SPEC, uid=running_again)
    older = finished(cluster, "c", days_ago=3, ttl=0)
    newer = finished(cluster, "d", days_ago=2, ttl=0)
    newest = finished(cluster, "e", days_ago=1, ttl=0)
    other_namespace = [finished(cluster, n, days_ago=6, ttl=0, namespace="team-b") for n in ("a", "b")]
    assert cluster.reconciler.sweeper.expire_results() == 3
    assert kept(cluster) == sorted([running_again, newest, *other_namespace])
    assert {oldest, older, newer}.isdisjoint(kept(cluster))
    assert cluster.reconciler.sweeper.expire_results() == 0, "at the cap (the kept job's result counts)"


@pytest.mark.parametrize("retain", [False, True])
def test_a_finished_jobs_checkpoint_directory_goes_with_its_result_unless_retained(retain: bool) -> None:
    cluster = Cluster()
    spec = {
        **SPEC,
        "checkpoint": {**SPEC["checkpoint"], "retainOnDelete": retain},
        "resultStore": {"ttlSeconds": 60},
    }
    cluster.jobs.apply(KEY, spec, uid=UID)
    cluster.reconcile()
    cluster.running()
    directory = run_dir(UID, 1)
    kept_anyway = [
        "s3://bucket/counts/savepoints/sp-1-a1/_manifest.json",  # savepoints outlive the job
        f"{run_dir('ffffffff-other-job', 1)}/query-0/commits/0",  # another job's (same storage)
        f"{directory}-2/x",  # not inside the directory, only beside it
    ]
    for uri in (f"{directory}/query-0/commits/0", f"{directory}/query-0/state/0/0/1.delta", *kept_anyway):
        cluster.storage.put(uri, b"x")
    cluster.drivers.set_driver(KEY, 1, DriverPhase.SUCCEEDED, exit_code=0)
    cluster.reconcile()  # the result, with the directory to delete with it
    cluster.reconcile(after=3600)
    assert cluster.status().phase == "Succeeded"
    assert cluster.reconciler.sweeper.expire_results() == 0, "the job still exists: its result and data stay"
    assert cluster.storage.any_with_prefix(directory + "/")
    cluster.jobs.delete(KEY)
    assert cluster.reconciler.sweeper.expire_results() == 1
    assert cluster.storage.any_with_prefix(directory + "/") is retain
    assert all(cluster.storage.get(uri) == b"x" for uri in kept_anyway)


@pytest.mark.parametrize("seen", ["deleted", "missed", "retained"])
def test_a_job_deleted_while_running_leaves_its_data_until_its_retention_unless_the_deletion_was_missed(
    seen: str,
) -> None:
    cluster = Cluster()
    keep = {"retainOnDelete": True} if seen == "retained" else {}
    checkpoint = {**SPEC["checkpoint"], **keep}
    cluster.jobs.apply(KEY, {**SPEC, "checkpoint": checkpoint, "resultStore": {"ttlSeconds": 60}}, uid=UID)
    cluster.reconcile()
    cluster.running()
    directory = run_dir(UID, 1)
    foreign = f"{run_dir('ffffffff-other-job', 1)}/query-0/commits/0"
    for uri in (f"{directory}/query-0/commits/0", foreign):
        cluster.storage.put(uri, b"x")
    job = cluster.jobs.get(KEY)
    assert job is not None
    # Its status names another job's directory too (the status is the user's): never deleted.
    hostile = {**job.status, "retiredCheckpointDirectories": [run_dir("ffffffff-other-job", 1)]}
    cluster.jobs.write_status(job, hostile)
    last = cluster.jobs.get(KEY)
    assert last is not None
    cluster.jobs.delete(KEY)
    if seen != "missed":  # the watch's DELETED event, with the job's last state
        cluster.reconciler.note_deleted(last)
    cluster.reconcile()
    entry = cluster.stores.results.get(UID)
    if seen != "deleted":
        assert entry is None, "nothing to delete later: no entry"
    else:
        assert entry is not None
        assert (entry.state, entry.clean, entry.data) == ("Cancelled", True, (directory + "/",))
    assert cluster.reconciler.sweeper.expire_results() == 0, "not before its retention"
    cluster.now += timedelta(seconds=61)
    cluster.reconciler.sweeper.expire_results()
    assert cluster.storage.any_with_prefix(directory + "/") is (seen != "deleted")
    assert cluster.storage.get(foreign) == b"x"
    assert cluster.stores.results.get(UID) is None


def test_a_namespace_whose_results_cannot_be_swept_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Cluster(max_results=1)
    for namespace in ("team-a", "team-b", "team-c"):
        for name in ("old", "new"):
            finished(cluster, name, days_ago=2 if name == "old" else 1, ttl=0, namespace=namespace)
    get = cluster.jobs.get

    def unreachable_in_team_b(key: JobKey) -> JobResource | None:
        if key.namespace == "team-b":
            raise ConnectionError("the API server did not answer")
        return get(key)

    monkeypatch.setattr(cluster.jobs, "get", unreachable_in_team_b)
    assert cluster.reconciler.sweeper.expire_results() == 2
    assert kept(cluster) == sorted(["uid-team-a-new", "uid-team-b-old", "uid-team-b-new", "uid-team-c-new"])


@pytest.mark.parametrize(
    ("reason", "said"),
    [(NO_PROGRESS, "made no progress"), (EXECUTORS_NOT_STARTED, "had no executor running")],
)
def test_a_driver_that_ended_itself_for_no_progress_is_restarted_with_a_warning(
    cluster: Cluster, reason: str, said: str
) -> None:
    cluster.jobs.apply(KEY, {**SPEC, "liveness": {"progressTimeoutSeconds": 30}}, uid=UID)
    cluster.reconcile()
    cluster.running()
    assert next(c for c in cluster.status().conditions if c.type == "Ready").status == "True"
    cluster.drivers.set_driver(
        KEY, 1, DriverPhase.FAILED, exit_code=Exit.NO_PROGRESS, reason=reason, message="query q: 31 s"
    )
    cluster.reconcile(after=31)
    status = cluster.status()
    assert status.phase == "Restarting"
    assert status.last_failure is not None
    assert status.last_failure.reason == reason
    degraded = next(c for c in status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason) == ("True", reason)
    (warning,) = [e for e in cluster.events.emitted if e.reason == reason]
    assert warning.type == "Warning"
    assert f"attempt 1 {said} within spec.liveness.progressTimeoutSeconds (30 s)" in warning.message
    cluster.drivers.pods.pop(KEY, None)  # the deleted pod is gone
    cluster.reconcile(after=5)
    assert cluster.drivers.plans[-1].attempt == 2
    assert cluster.events.reasons().count(reason) == 1, "said once"


# -- savepoint disposal: the two-phase protocol of domain.savepoints over the in-memory storage --

PERIODIC = {**SPEC, "savepoints": {"periodicIntervalSeconds": 60, "history": {"maxCount": 2}}}


def savepoint_folder(savepoint_id: str) -> str:
    return f"s3://bucket/counts/savepoints/{savepoint_id}/"


def take_periodic_savepoints(cluster: Cluster, count: int) -> list[str]:
    """Attempt 1 running; a periodic savepoint a minute, each written to storage as the runtime writes it
    (its manifest last) and answered on the pod. Their ids."""
    cluster.jobs.apply(KEY, PERIODIC, uid=UID)
    cluster.reconcile()
    cluster.running()
    taken: list[str] = []
    for _ in range(count):
        cluster.reconcile(after=60)
        _, savepoint_id = cluster.drivers.controls[-1]
        folder = savepoint_folder(savepoint_id)
        cluster.storage.put(f"{folder}query-0/metadata", b"{}")
        manifest = {"id": savepoint_id, "job": str(KEY), "jobUid": UID}
        cluster.storage.put(f"{folder}_manifest.json", json.dumps(manifest).encode())
        report = SavepointReport(savepoint_id, folder.rstrip("/"), batch_id=len(taken))
        cluster.drivers.set_driver(KEY, 1, DriverPhase.RUNNING, savepoint=report)
        cluster.reconcile()
        taken.append(savepoint_id)
    return taken


def test_a_savepoint_past_the_history_loses_its_data_before_its_reference(cluster: Cluster) -> None:
    oldest, *kept = take_periodic_savepoints(cluster, 3)
    assert cluster.status().savepoints_disposing == [oldest]
    assert cluster.storage.any_with_prefix(savepoint_folder(oldest)), "chosen: nothing deleted yet"

    deletes: list[tuple[str, str]] = []
    delete_prefix = cluster.storage.delete_prefix

    def recorded(prefix: str, *, last: str = "") -> None:
        deletes.append((prefix, last))
        delete_prefix(prefix, last=last)

    cluster.storage.delete_prefix = recorded  # type: ignore[method-assign]
    assert cluster.reconcile(after=1) == 10
    folder = savepoint_folder(oldest)
    assert deletes == [(folder, f"{folder}_manifest.json")], "the manifest, which says whose it is, last"
    assert not cluster.storage.any_with_prefix(folder)
    assert [sp.id for sp in cluster.status().savepoints] == [oldest, *kept], "the reference outlives the data"

    cluster.reconcile(after=10)
    status = cluster.status()
    assert ([sp.id for sp in status.savepoints], status.savepoints_disposing) == (kept, [])
    assert all(cluster.storage.any_with_prefix(savepoint_folder(i)) for i in kept)
    assert cluster.events.reasons()[-1] == "SavepointDisposed"
    cluster.reconcile(after=60)
    assert cluster.drivers.controls[-1][1] not in [oldest, *kept], "periodic savepoints go on"


def test_a_new_leader_finishes_a_disposal_the_last_one_left_half_done(cluster: Cluster) -> None:
    oldest, *_ = take_periodic_savepoints(cluster, 3)
    cluster.storage.delete(f"{savepoint_folder(oldest)}query-0/metadata")  # it crashed mid-delete
    successor = Cluster(
        jobs=cluster.jobs,
        drivers=cluster.drivers,
        stores=cluster.stores,
        storage=cluster.storage,
        now=cluster.now,
    )
    successor.reconcile(after=1)
    assert not successor.storage.any_with_prefix(savepoint_folder(oldest))
    successor.reconcile(after=10)
    assert oldest not in [sp.id for sp in successor.status().savepoints]


@pytest.mark.parametrize(
    "owner",
    [
        {"job": "team-b/counts", "jobUid": "ffffffff-another-job"},
        {"job": str(KEY), "jobUid": "ffffffff-an-earlier-job-of-the-same-name"},
        {"job": str(KEY)},  # written before manifests named the uid: kept, never guessed at
    ],
    ids=["another-job", "same-name-earlier-uid", "no-uid"],
)
def test_a_folder_without_this_jobs_manifest_is_never_deleted(
    cluster: Cluster, owner: dict[str, str]
) -> None:
    oldest, *kept = take_periodic_savepoints(cluster, 3)
    manifest = f"{savepoint_folder(oldest)}_manifest.json"
    cluster.storage.objects[manifest] = json.dumps({"id": oldest, **owner}).encode()
    cluster.reconcile(after=1)
    assert cluster.storage.get(manifest) is not None
    assert cluster.storage.any_with_prefix(f"{savepoint_folder(oldest)}query-0/")
    assert [sp.id for sp in cluster.status().savepoints] == kept
    assert cluster.events.reasons()[-1] == "SavepointNotDisposed"


def test_a_delete_storage_refuses_is_reported_and_tried_again_without_holding_up_the_job(
    cluster: Cluster,
) -> None:
    oldest, *_ = take_periodic_savepoints(cluster, 3)
    delete_prefix = cluster.storage.delete_prefix

    def refused(prefix: str, *, last: str = "") -> None:
        raise StoreUnavailableError(f"delete under {prefix}: S3 answered 403 AccessDenied")

    cluster.storage.delete_prefix = refused  # type: ignore[method-assign]
    cluster.drivers.set_driver(KEY, 1, DriverPhase.FAILED, exit_code=1, message="boom")
    cluster.reconcile(after=1)
    assert cluster.status().phase == "Restarting", "the rest of the decision was carried out and recorded"
    assert "SavepointDisposalFailed" in cluster.events.reasons()
    assert oldest in cluster.status().savepoints_disposing
    cluster.storage.delete_prefix = delete_prefix  # type: ignore[method-assign]
    cluster.reconcile(after=10)
    cluster.reconcile(after=10)
    assert oldest not in [sp.id for sp in cluster.status().savepoints]
    assert not cluster.storage.any_with_prefix(savepoint_folder(oldest))


def test_a_deposed_leader_disposes_of_nothing(cluster: Cluster) -> None:
    oldest, *_ = take_periodic_savepoints(cluster, 3)
    cluster.leading = False
    with pytest.raises(NotLeadingError):
        cluster.reconcile(after=1)
    assert cluster.storage.any_with_prefix(savepoint_folder(oldest))


def test_a_sealed_result_naming_anything_but_its_jobs_checkpoint_folders_gets_only_those_deleted() -> None:
    """Defence behind the seal: whatever a result says, retention deletes only the operator's own naming of
    its job's run folders (<storage>/checkpoints/<uid8>-run-<n>/)."""
    cluster = Cluster()
    own = f"{run_dir(UID, 1)}/"
    named = [own, "s3://victim-bucket/all/", f"{run_dir('ffffffff-other-job', 1)}/", f"{run_dir(UID, 1)}-x/"]
    for prefix in named:
        cluster.storage.put(f"{prefix}data", b"x")
    entry = JobResultEntry(
        job=KEY, uid=UID, state="Succeeded", finished_at=cluster.now, retain_seconds=1, data=tuple(named)
    )
    cluster.stores.results.create_dirty(entry, LEADER)
    cluster.stores.results.mark_clean(UID, LEADER)
    cluster.now += timedelta(seconds=2)
    assert cluster.reconciler.sweeper.expire_results() == 1
    assert sorted(cluster.storage.objects) == sorted(f"{prefix}data" for prefix in named[1:])


def test_a_cleanup_that_fails_is_tried_again_at_the_next_sweep_and_keeps_no_other_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Cluster()
    for name in ("a", "b"):
        entry = JobResultEntry(
            job=JobKey(namespace="team-a", name=name),
            uid=f"uid-{name}",
            state="Failed",
            finished_at=cluster.now,
        )
        cluster.stores.results.create_dirty(entry, LEADER)
    delete_all = cluster.drivers.delete_all
    refused = {"uid-a"}

    def refusing(key: JobKey, uid: str) -> None:
        if uid in refused:
            raise ConnectionError("the API server refused the delete")
        delete_all(key, uid)

    monkeypatch.setattr(cluster.drivers, "delete_all", refusing)
    assert cluster.reconciler.sweeper.finish_dirty_results() == 1
    assert [(e.uid, e.clean) for e in cluster.stores.results.entries()] == [("uid-a", False), ("uid-b", True)]
    refused.clear()
    assert cluster.reconciler.sweeper.finish_dirty_results() == 1
    assert all(entry.clean for entry in cluster.stores.results.entries())


def test_a_job_only_waiting_for_its_driver_asks_for_a_backed_off_look() -> None:
    """A stop waits for the driver to end (its pod's watch event wakes the job): the first pass changes the
    status and asks for a look in a second like any; the passes after it change nothing and say so, so the
    controller backs them off (reconcile.pacing.WaitBackoff) instead of a pass a second per waiting job."""
    cluster = Cluster()
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.jobs.apply(KEY, {**SPEC, "desiredState": "stopped"}, uid=UID)
    first, second = cluster.reconciler.reconcile(KEY), cluster.reconciler.reconcile(KEY)
    assert cluster.status().phase == "Stopping"
    assert (first.after, first.idle_wait) == (1.0, False), "the pass that asked for the stop changed things"
    assert (second.after, second.idle_wait) == (1.0, True)


def test_a_job_whose_reconciles_keep_failing_says_why_until_one_goes_through(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's own S3 refuses the look at the checkpoint a restart needs: the job, not only the
    operator's log, says so (Reconciled=False, an Event once), and stops saying it once a reconcile works."""
    monkeypatch.setattr(controller_module, "_MIN_ERROR_BACKOFF", 0.01)  # retries 0.01, 0.02, 0.04 s ...
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 1)
    cluster.fail()
    cluster.inspector.error = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "HeadObject"
    )
    controller = Controller(
        cluster.reconciler,
        api_configuration=client.Configuration(),
        workers=1,
        namespaces=(),
        on_fatal=lambda: None,
    )
    worker = threading.Thread(target=controller._work, daemon=True)
    worker.start()
    controller._queue.add(KEY)
    try:
        eventually(lambda: _reconciled(cluster) is not None, timeout=30, what="the job says it")
        said = _reconciled(cluster)
        assert said is not None and (said.status, said.reason) == ("False", OPERATOR_ERROR)
        assert said.message == (
            "the operator's S3 (its endpoint and credentials, not the job's) failed: An error occurred "
            "(AccessDenied) when calling the HeadObject operation: Access Denied (tried again with a "
            "growing delay)"
        )
        eventually(lambda: _failures(controller) >= 6, timeout=30, what="more failures")
        assert cluster.events.reasons().count(OPERATOR_ERROR) == 1, "news once, not every failure"
        cluster.now += timedelta(seconds=10)  # past the restart delay
        cluster.inspector.error = None
        eventually(lambda: _reconciled(cluster) is None, timeout=70, what="the condition gone again")
    finally:
        controller._queue.shut_down()
        worker.join(10)
    assert cluster.status().attempt == 2, "the restart went on"


def _reconciled(cluster: Cluster) -> Condition | None:
    return next((c for c in cluster.status().conditions if c.type == "Reconciled"), None)


def _failures(controller: Controller) -> int:
    return controller._failures.get(KEY, 0)


def test_a_failure_is_recovered_when_a_later_attempt_commits_its_first_batch(cluster: Cluster) -> None:
    """Its time, from the failure seen to that batch, in the failure (status and history) and as a gauge;
    where the seconds went, from the container's end (the kubelet's word), the operator's own times and the
    new driver's: in the status, an Event and one histogram observation per step."""
    cluster.jobs.apply(KEY, SPEC, uid=UID)
    cluster.reconcile()
    cluster.running()
    cluster.commit(1, 1)
    cluster.reconcile(after=1)
    ended = cluster.now
    cluster.now += timedelta(seconds=2)  # the operator sees it 2 s after the container ended
    cluster.drivers.set_driver(KEY, 1, DriverPhase.FAILED, exit_code=137, ended_at=ended)
    cluster.reconcile()
    cluster.drivers.pods.pop(KEY, None)
    failed = cluster.status().last_failure
    assert failed is not None and failed.recovery_seconds is None and failed.ended_at == ended
    cluster.reconcile(after=6)  # past the 5 s restart delay: attempt 2, 8 s after the end
    cluster.now += timedelta(seconds=1)
    cluster.running(2)  # 9 s
    before = _phase_observations("committed")
    cluster.now += timedelta(seconds=12)
    cluster.reconcile(after=1)
    assert cluster.status().last_failure == failed, "running is not recovered: a batch committed is"
    start = DriverStart(
        runtime_started=ended + timedelta(seconds=10),
        session_up=ended + timedelta(seconds=13),  # built while it waited for the Lease: counted before it
        lease_acquired=ended + timedelta(seconds=14),
        executors_registered=ended + timedelta(seconds=15),
        first_batch_started=ended + timedelta(seconds=18),
    )
    cluster.commit(2, 3, start=start)  # 22 s after the end
    cluster.now += timedelta(seconds=2)
    cluster.commit(2, 4, start=start)  # the next batch, committed before the operator looked
    cluster.reconcile(after=1)
    status = cluster.status()
    assert status.last_failure is not None and status.last_failure.recovery_seconds == 20.0
    assert status.last_failure.recovery_phases == RecoveryPhases(
        seen=2.0,
        submitted=8.0,
        pod_running=9.0,
        runtime_started=10.0,
        session_up=13.0,
        lease_acquired=14.0,
        executors_registered=15.0,
        first_batch_started=18.0,
        committed=22.0,
    )
    assert status.failures == [status.last_failure]
    labels = {"namespace": KEY.namespace, "job": KEY.name}
    assert REGISTRY.get_sample_value("ftspark_job_last_recovery_seconds", labels) == 20.0
    assert _phase_observations("committed") == before + 1
    cluster.reconcile(after=1)
    assert _phase_observations("committed") == before + 1, "observed once, when recorded"
    (recovered,) = [e for e in cluster.events.emitted if e.reason == "Recovered"]
    assert recovered.message == (
        "attempt 2 committed batch 3: recovered in 22.0 s by a new driver (seen 2.0, submitted 6.0, pod "
        "started 1.0, runtime 1.0, session 3.0, lease 1.0, executors 1.0, first batch started 3.0, committed "
        "4.0 s)"
    )


def _phase_observations(phase: str) -> float:
    labels = {"phase": phase, "way": "new-driver"}
    return REGISTRY.get_sample_value("ftspark_recovery_phase_seconds_count", labels) or 0.0
