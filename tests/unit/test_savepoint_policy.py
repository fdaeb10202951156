"""Periodic savepoints and the savepoint history (domain.savepoints, driven through `decide`), and the folder
prefixes the disposal refuses to delete (ports.blobs.check_folder; the deletes themselves, in memory and on
the S3 server: tests/contract/test_blob_store.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.lifecycle import (
    Decision,
    DisposeSavepoint,
    DriverObservation,
    DriverPhase,
    EmitEvent,
    Observation,
    RequestSavepoint,
    SavepointReport,
    SubmittedGraph,
    decide,
    spec_hash,
)
from ftspark.domain.models import (
    YEAR_SECONDS,
    JobSpec,
    JobStatus,
    SavepointOrigin,
    SavepointRef,
    SavepointRequest,
)
from ftspark.domain.savepoints import SavepointData
from ftspark.ports.blobs import check_folder
from ftspark.testing.stores import MemoryBlobStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
UID = "0123abcd-0000-4000-8000-000000000000"
STORAGE = "s3://bucket/job"
HOUR = 3600.0
BASE = {"image": "img", "mainApplicationFile": "local:///job.py", "checkpoint": {"storage": STORAGE}}


def spec(*, interval: int = 0, max_count: int = 10, max_age: int = 86400, **changes: Any) -> JobSpec:
    history = {"maxCount": max_count, "maxAgeSeconds": max_age}
    savepoints = {"periodicIntervalSeconds": interval, "history": history}
    return JobSpec.model_validate({**BASE, "savepoints": savepoints, **changes})


def running(**status: Any) -> JobStatus:
    """Attempt 1 running since T0."""
    return JobStatus(phase="Running", attempt=1, driver_pod="job-1-driver", attempt_started_at=T0, **status)


def driver(savepoint: SavepointReport | None = None, started_at: datetime = T0) -> DriverObservation:
    running = DriverPhase.RUNNING
    return DriverObservation(1, "job-1-driver", running, savepoint=savepoint, started_at=started_at)


def ref(
    savepoint_id: str,
    *,
    age_hours: float = 1.0,
    now: float = 0.0,
    location: str = "",
    origin: SavepointOrigin | None = "manual",
) -> SavepointRef:
    """A savepoint completed age_hours before `now` (seconds after T0), where the job's driver writes it."""
    return SavepointRef(
        id=savepoint_id,
        time=T0 + timedelta(seconds=now - age_hours * HOUR),
        location=location or f"{STORAGE}/savepoints/{savepoint_id}",
        batch_id=1,
        origin=origin,
    )


def at(
    job: JobSpec,
    status: JobStatus,
    seconds: float,
    *drivers: DriverObservation,
    disposing: dict[str, SavepointData] | None = None,
) -> Decision:
    """decide() `seconds` after T0, the attempt's driver running unless drivers are given."""
    observation = Observation(
        job_uid=UID,
        generation=1,
        spec_hash=spec_hash(job),
        graph=SubmittedGraph(UID, spec_hash(job), f"{STORAGE}/checkpoints/0123abcd-run-1"),
        drivers=drivers or (driver(),),
        disposing=disposing or {},
    )
    return decide(job, status, observation, T0 + timedelta(seconds=seconds), lambda: 0.5)


def requested(decision: Decision) -> list[str]:
    return [a.savepoint_id for a in decision.actions if isinstance(a, RequestSavepoint)]


def disposed(decision: Decision) -> list[DisposeSavepoint]:
    return [a for a in decision.actions if isinstance(a, DisposeSavepoint)]


def events(decision: Decision) -> list[str]:
    return [a.reason for a in decision.actions if isinstance(a, EmitEvent)]


def ids(status: JobStatus) -> list[str]:
    return [taken.id for taken in status.savepoints]


def answer(decision: Decision, *, error: str = "") -> SavepointReport:
    """The driver's answer to the savepoint the decision asked for."""
    (savepoint_id,) = requested(decision)
    return SavepointReport(savepoint_id, f"{STORAGE}/savepoints/{savepoint_id}", batch_id=5, error=error)


# -- periodic savepoints --


def test_periodic_savepoints_are_off_by_default() -> None:
    decision = at(spec(), running(), 10 * 86400)
    assert requested(decision) == []
    assert decision.requeue_after == 300


def test_the_first_periodic_savepoint_is_due_an_interval_after_the_attempt_started() -> None:
    job = spec(interval=600)
    early = at(job, running(), 599)
    assert requested(early) == []
    assert early.requeue_after == pytest.approx(1), "looked at again when it is due, not at the 300 s poll"
    due = at(job, running(), 600)
    assert requested(due) == [f"sp-periodic-{int((T0 + timedelta(seconds=600)).timestamp())}-0123abcd-a1"]
    assert due.status.last_periodic_savepoint_at == T0 + timedelta(seconds=600)
    pending = due.status.savepoint_in_progress
    assert pending is not None
    assert (pending.trigger_nonce, pending.origin) == (None, "periodic")
    assert due.requeue_after == 300, "waiting for the answer: the stop timeout"


def test_a_job_that_just_started_running_waits_a_whole_interval() -> None:
    job = spec(interval=60)
    submitting = JobStatus(phase="Submitting", attempt=1)
    started = at(job, submitting, 1000, driver(started_at=T0 + timedelta(seconds=1000)))
    assert started.status.phase == "Running"
    assert requested(started) == []
    assert started.requeue_after == pytest.approx(60)


def test_the_next_periodic_savepoint_counts_from_the_last_request_and_the_answer_is_recorded() -> None:
    job = spec(interval=600)
    asked = at(job, running(handled_savepoint_nonce=3), 600)
    done = at(job, asked.status, 640, driver(answer(asked)))
    assert done.status.savepoint_in_progress is None
    assert done.status.handled_savepoint_nonce == 3, "a periodic answer handles no nonce"
    (taken,) = done.status.savepoints
    assert (taken.origin, taken.trigger_nonce, taken.batch_id) == ("periodic", None, 5)
    assert at(job, done.status, 1000).requeue_after == pytest.approx(200), "600 s after the request"
    assert requested(at(job, done.status, 1199)) == []
    assert len(requested(at(job, done.status, 1200))) == 1


def test_an_unanswered_periodic_savepoint_is_given_up_and_the_next_one_comes_an_interval_later() -> None:
    job = spec(interval=600, stopTimeoutSeconds=60, savepointTriggerNonce=3)
    asked = at(job, running(handled_savepoint_nonce=3), 600)
    given_up = at(job, asked.status, 660)
    assert "SavepointFailed" in events(given_up)
    assert given_up.status.savepoint_in_progress is None
    assert given_up.status.handled_savepoint_nonce == 3, "the user's nonce is not asked again"
    assert requested(at(job, given_up.status, 1199)) == []
    assert len(requested(at(job, given_up.status, 1200))) == 1


def test_a_new_nonce_wins_over_a_due_periodic_savepoint_which_follows_it() -> None:
    job = spec(interval=600, savepointTriggerNonce=7)
    both_due = at(job, running(handled_savepoint_nonce=6), 600)
    assert requested(both_due) == ["sp-7-0123abcd-a1"]
    assert both_due.status.last_periodic_savepoint_at is None
    still_waiting = at(job, both_due.status, 610)
    assert requested(still_waiting) == [], "one savepoint at a time"
    done = at(job, both_due.status, 620, driver(answer(both_due)))
    assert done.status.savepoints[-1].origin == "manual"
    assert done.status.handled_savepoint_nonce == 7
    periodic = at(job, done.status, 621, driver(answer(both_due)))
    assert [i.split("-")[1] for i in requested(periodic)] == ["periodic"]


def test_periodic_savepoints_wait_while_earlier_ones_are_disposed_of() -> None:
    job = spec(interval=600)
    disposing = running(savepoints=[ref("sp-old"), ref("sp-new")], savepoints_disposing=["sp-old"])
    decision = at(job, disposing, 600)
    assert requested(decision) == []
    assert decision.requeue_after == 10, "looked at again for the disposal, not every 50 ms"
    gone = at(job, disposing, 600, disposing={"sp-old": SavepointData.GONE})
    assert gone.status.savepoints_disposing == []
    assert gone.requeue_after == 0.05, "the savepoint that waited is asked for in the next pass"
    early = at(job, disposing, 450, disposing={"sp-old": SavepointData.GONE})
    assert early.requeue_after == pytest.approx(150), "or when it is due, not at the 300 s poll"


def test_a_nonce_whose_savepoint_id_is_being_disposed_of_waits_for_the_disposal() -> None:
    job = spec(savepointTriggerNonce=4)
    reused = running(
        savepoints=[ref("sp-4-0123abcd-a1"), ref("sp-5-0123abcd-a1")],
        savepoints_disposing=["sp-4-0123abcd-a1"],
    )
    assert requested(at(job, reused, 0)) == []
    gone = at(job, reused, 0, disposing={"sp-4-0123abcd-a1": SavepointData.GONE})
    assert requested(at(job, gone.status, 1)) == ["sp-4-0123abcd-a1"]


def test_an_upgrade_savepoint_records_its_origin() -> None:
    old, new = spec(upgradeMode="savepoint"), spec(upgradeMode="savepoint", arguments=["--v2"])
    report = SavepointReport(
        "sp-upgrade-0123abcd-a1", f"{STORAGE}/savepoints/sp-upgrade-0123abcd-a1", batch_id=9
    )
    stopped = DriverObservation(1, "job-1-driver", DriverPhase.SUCCEEDED, exit_code=0, savepoint=report)
    observation = Observation(
        job_uid=UID,
        generation=2,
        spec_hash=spec_hash(new),
        graph=SubmittedGraph(UID, spec_hash(old), f"{STORAGE}/checkpoints/0123abcd-run-1"),
        drivers=(stopped,),
    )
    upgrading = running().model_copy(update={"phase": "Upgrading", "stop_requested_at": T0})
    decision = decide(new, upgrading, observation, T0, lambda: 0.5)
    (taken,) = decision.status.savepoints
    assert (taken.id, taken.origin) == ("sp-upgrade-0123abcd-a1", "upgrade")


# -- the history: which savepoints to dispose of --


def test_beyond_max_count_the_oldest_are_chosen_and_nothing_is_deleted_yet() -> None:
    twelve = running(savepoints=[ref(f"sp-{n}", age_hours=12 - n) for n in range(12)])
    decision = at(spec(max_count=10), twelve, 0)
    assert decision.status.savepoints_disposing == ["sp-0", "sp-1"]
    assert ids(decision.status) == ids(twelve), "references stay until their data is gone"
    assert disposed(decision) == [], "the choice is written before any delete"
    assert "SavepointDisposing" in events(decision)
    assert decision.requeue_after == 0.05, "the deletes come in the next pass, right after the status write"


def test_savepoints_older_than_max_age_are_chosen_but_never_the_newest() -> None:
    hours = {"sp-a": 50, "sp-b": 30, "sp-c": 25}
    old = running(savepoints=[ref(savepoint_id, age_hours=age) for savepoint_id, age in hours.items()])
    decision = at(spec(max_age=24 * 3600), old, 0)
    assert decision.status.savepoints_disposing == ["sp-a", "sp-b"]
    young = running(savepoints=[ref("sp-a", age_hours=23), ref("sp-b", age_hours=1)])
    assert at(spec(max_age=24 * 3600), young, 0).status.savepoints_disposing == []
    assert at(spec(max_age=0), old, 0).status.savepoints_disposing == [], "0: no age limit"


def test_savepoints_taken_before_the_history_existed_are_never_chosen() -> None:
    legacy = [ref(f"sp-old-{n}", age_hours=1000 - n, origin=None) for n in range(5)]
    status = running(savepoints=[*legacy, ref("sp-a", age_hours=30), ref("sp-b", age_hours=1)])
    decision = at(spec(max_count=1, max_age=24 * 3600), status, 0)
    assert decision.status.savepoints_disposing == ["sp-a"], "after an operator upgrade, nothing of before"


def test_a_single_savepoint_is_kept_however_old_and_whatever_the_count() -> None:
    only = running(savepoints=[ref("sp-a", age_hours=24 * 300)])
    assert at(spec(max_count=1, max_age=60), only, 0).status.savepoints_disposing == []


@pytest.mark.parametrize(
    "initial", [f"{STORAGE}/savepoints/sp-0", "s3a://bucket/job/savepoints/sp-0/"], ids=["s3", "s3a/"]
)
def test_the_savepoint_the_job_was_started_from_is_never_chosen(initial: str) -> None:
    three = running(savepoints=[ref(f"sp-{n}", age_hours=100 - n) for n in range(3)])
    decision = at(spec(max_count=1, max_age=3600, initialSavepoint=initial), three, 0)
    assert decision.status.savepoints_disposing == ["sp-1"]


def test_one_already_disposing_is_not_chosen_twice_and_does_not_count() -> None:
    three = [ref(f"sp-{n}", age_hours=3 - n) for n in range(3)]
    status = running(savepoints=three, savepoints_disposing=["sp-0"])
    decision = at(spec(max_count=2), status, 0, disposing={})
    assert decision.status.savepoints_disposing == ["sp-0"], "two left: within maxCount"


def test_an_id_taken_twice_is_one_folder_judged_by_its_newest_savepoint() -> None:
    hours = [("sp-4-a1", 4), ("sp-5-a1", 3), ("sp-4-a1", 2), ("sp-6-a1", 1)]
    reused = running(savepoints=[ref(savepoint_id, age_hours=age) for savepoint_id, age in hours])
    assert at(spec(max_count=2), reused, 0).status.savepoints_disposing == ["sp-5-a1"]


def test_the_history_is_applied_only_while_the_job_runs() -> None:
    stopped = JobStatus(phase="Stopped", attempt=1, savepoints=[ref(f"sp-{n}") for n in range(5)])
    finished = DriverObservation(1, "job-1-driver", DriverPhase.SUCCEEDED, exit_code=0)
    decision = at(spec(max_count=1, desiredState="stopped"), stopped, 0, finished)
    assert decision.status.savepoints_disposing == []


# -- the disposal: chosen, deleted, dropped --


def test_a_disposal_deletes_only_after_its_choice_was_recorded_then_drops_the_reference_once_gone() -> None:
    job = spec(max_count=1)
    two = running(savepoints=[ref("sp-a"), ref("sp-b")])
    chosen = at(job, two, 0, disposing={"sp-a": SavepointData.OWN})
    assert (chosen.status.savepoints_disposing, disposed(chosen)) == (["sp-a"], [])

    deleting = at(job, chosen.status, 1, disposing={"sp-a": SavepointData.OWN})
    assert disposed(deleting) == [DisposeSavepoint("sp-a", f"{STORAGE}/savepoints/sp-a/")]
    assert ids(deleting.status) == ["sp-a", "sp-b"], "the reference stays until storage shows it gone"
    assert deleting.status == chosen.status.model_copy(update={"observed_generation": 1}), "no status write"
    assert deleting.requeue_after == 10, "no write wakes the job: it looks again itself"

    gone = at(job, deleting.status, 2, disposing={"sp-a": SavepointData.GONE})
    assert (ids(gone.status), gone.status.savepoints_disposing, disposed(gone)) == (["sp-b"], [], [])
    assert "SavepointDisposed" in events(gone)
    assert gone.requeue_after == 300


def test_a_choice_refused_as_stale_is_simply_decided_again_and_nothing_was_deleted() -> None:
    job = spec(max_count=1)
    two = running(savepoints=[ref("sp-a"), ref("sp-b")])
    first = at(job, two, 0)
    assert disposed(first) == []
    # The write was refused (409): the next pass reads the old status again, meanwhile the user made the
    # chosen savepoint the one to start from. It is kept: nothing of it was deleted.
    again = at(spec(max_count=1, initialSavepoint=f"{STORAGE}/savepoints/sp-a"), two, 1)
    assert (again.status.savepoints_disposing, disposed(again)) == ([], [])


def test_a_leader_that_crashed_mid_disposal_is_followed_by_one_that_deletes_again_then_drops_it() -> None:
    # Left behind: the id recorded, part of the data deleted, the manifest (deleted last) still there.
    half_done = running(savepoints=[ref("sp-a"), ref("sp-b")], savepoints_disposing=["sp-a"])
    job = spec(max_count=1)
    next_leader = at(job, half_done, 0, disposing={"sp-a": SavepointData.OWN})
    assert disposed(next_leader) == [DisposeSavepoint("sp-a", f"{STORAGE}/savepoints/sp-a/")]
    assert ids(next_leader.status) == ["sp-a", "sp-b"]
    finished = at(job, next_leader.status, 10, disposing={"sp-a": SavepointData.GONE})
    assert ids(finished.status) == ["sp-b"]


def test_a_dropped_reference_refused_as_stale_is_dropped_again_without_another_delete() -> None:
    deleted = running(savepoints=[ref("sp-a"), ref("sp-b")], savepoints_disposing=["sp-a"])
    job = spec(max_count=1)
    first = at(job, deleted, 0, disposing={"sp-a": SavepointData.GONE})
    again = at(job, deleted, 1, disposing={"sp-a": SavepointData.GONE})  # the first write got a 409
    assert ids(again.status) == ids(first.status) == ["sp-b"]
    assert disposed(again) == []


def test_storage_that_cannot_be_read_leaves_the_disposal_as_it_is_until_the_next_look() -> None:
    pending = running(savepoints=[ref("sp-a"), ref("sp-b")], savepoints_disposing=["sp-a"])
    decision = at(spec(max_count=1), pending, 0, disposing={})
    assert (ids(decision.status), decision.status.savepoints_disposing, disposed(decision)) == (
        ["sp-a", "sp-b"],
        ["sp-a"],
        [],
    )
    assert decision.requeue_after == 10


@pytest.mark.parametrize(
    ("location", "data"),
    [
        ("s3://other-bucket/job/savepoints/sp-a", SavepointData.OWN),  # not where the job keeps it
        (f"{STORAGE}/savepoints/sp-other", SavepointData.OWN),  # another savepoint's folder
        (f"{STORAGE}/savepoints/sp-a", SavepointData.FOREIGN),  # its folder holds another job's manifest
    ],
    ids=["other-bucket", "other-folder", "foreign-manifest"],
)
def test_a_savepoint_that_is_not_the_jobs_loses_its_reference_but_nothing_is_deleted(
    location: str, data: SavepointData
) -> None:
    pending = running(savepoints=[ref("sp-a", location=location), ref("sp-b")], savepoints_disposing=["sp-a"])
    decision = at(spec(), pending, 0, disposing={"sp-a": data})
    assert disposed(decision) == []
    assert (ids(decision.status), decision.status.savepoints_disposing) == (["sp-b"], [])
    assert "SavepointNotDisposed" in events(decision)


def test_an_id_that_is_not_one_path_segment_is_never_deleted() -> None:
    sneaky = ref("sp-a/..", location=f"{STORAGE}/savepoints/sp-a/..")
    pending = running(savepoints=[sneaky, ref("sp-b")], savepoints_disposing=["sp-a/.."])
    decision = at(spec(), pending, 0, disposing={"sp-a/..": SavepointData.OWN})
    assert disposed(decision) == []
    assert ids(decision.status) == ["sp-b"]


def test_a_disposal_under_way_is_finished_whatever_the_phase() -> None:
    stopped = JobStatus(
        phase="Stopped", attempt=1, savepoints=[ref("sp-a"), ref("sp-b")], savepoints_disposing=["sp-a"]
    )
    job = spec(desiredState="stopped")
    finished = DriverObservation(1, "job-1-driver", DriverPhase.SUCCEEDED, exit_code=0)
    deleting = at(job, stopped, 0, finished, disposing={"sp-a": SavepointData.OWN})
    assert [d.savepoint_id for d in disposed(deleting)] == ["sp-a"]
    assert deleting.requeue_after == 10, "a stopped job is otherwise only woken by changes"


# -- the spec --


@pytest.mark.parametrize(
    "savepoints",
    [
        {"periodicIntervalSeconds": -1},
        {"periodicIntervalSeconds": YEAR_SECONDS + 1},
        {"history": {"maxCount": 0}},
        {"history": {"maxCount": 101}},
        {"history": {"maxAgeSeconds": -1}},
        {"history": {"maxAgeSeconds": YEAR_SECONDS + 1}},
        {"periodicInterval": 60},  # a misspelt field is refused, not ignored
    ],
)
def test_absurd_savepoint_settings_are_refused(savepoints: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        JobSpec.model_validate({**BASE, "savepoints": savepoints})


def test_the_defaults_are_the_flink_operators_and_changing_them_restarts_nothing() -> None:
    default = JobSpec.model_validate(BASE)
    assert (default.savepoints.periodic_interval_seconds, default.savepoints.history.max_count) == (0, 10)
    assert default.savepoints.history.max_age_seconds == 24 * 3600
    assert spec_hash(spec()) == spec_hash(spec(interval=60, max_count=3, max_age=0))


def test_a_status_written_before_these_fields_still_reads() -> None:
    taken = {"id": "sp-1-a1", "time": "2026-01-01T00:00:00Z", "location": "s3://b/sp-1-a1", "batchId": 3}
    asked = {"id": "sp-2-a1", "triggerNonce": 2, "requestedAt": "2026-01-01T00:00:00Z"}
    old = {"phase": "Running", "savepoints": [taken], "savepointInProgress": asked}
    status = JobStatus.model_validate(old)
    assert status.savepoints[0].origin is None
    assert status.savepoints_disposing == []
    assert status.savepoint_in_progress == SavepointRequest(id="sp-2-a1", trigger_nonce=2, requested_at=T0)
    assert status.savepoint_in_progress.origin == "manual"


# -- the folder deletes (BlobStore.delete_prefix) --


@pytest.mark.parametrize(
    ("prefix", "last"),
    [
        ("s3://bucket/", ""),  # a whole bucket
        ("s3://bucket/job/savepoints/sp-1", ""),  # no folder: sp-10 too
        ("s3://bucket/job/savepoints//", ""),  # an empty id
        ("s3://bucket/job/savepoints/../", ""),
        ("s3://bucket/job/savepoints/sp-1/", "s3://bucket/job/other"),  # last outside the folder
        ("/job/savepoints/sp-1/", ""),
    ],
)
def test_a_prefix_that_is_not_a_folder_is_refused(prefix: str, last: str) -> None:
    with pytest.raises(ValueError, match="not a folder"):
        check_folder(prefix, last)
    store = MemoryBlobStore()
    store.put("s3://bucket/job/savepoints/sp-10/x", b"x")
    with pytest.raises(ValueError, match="not a folder"):
        store.delete_prefix(prefix, last=last)
    assert store.objects, "nothing deleted"
