"""Choosing the checkpoint a new attempt restores."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from ftspark.domain.ha import CheckpointPointer
from ftspark.domain.recovery import checkpoint_directory, choose_restore_point, is_checkpoint_directory

DIRECTORY = "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-1"


def pointer(checkpoint_id: int, location: str = f"{DIRECTORY}/query-0") -> CheckpointPointer:
    return CheckpointPointer(
        checkpoint_id=checkpoint_id,
        batch_id=checkpoint_id,
        location=location,
        completed_at=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
    )


def test_newest_usable_pointer_wins_and_skipped_ones_are_named() -> None:
    point = choose_restore_point(
        [pointer(9), pointer(8), pointer(7)], lambda p: p.checkpoint_id <= 7, DIRECTORY
    )
    assert point.pointer == pointer(7)
    assert point.skipped == (9, 8)
    assert point.why_skipped == "unusable checkpoints [9, 8]: [9, 8] not complete in storage"


def test_no_pointers_means_a_fresh_start() -> None:
    point = choose_restore_point([], lambda p: True, DIRECTORY)
    assert point.pointer is None
    assert point.unusable == ""


def test_pointers_without_any_usable_checkpoint_require_a_manual_restore() -> None:
    point = choose_restore_point([pointer(9), pointer(8)], lambda p: False, DIRECTORY)
    assert point.pointer is None
    assert re.search(r"\[9, 8\].*manual restore required", point.unusable)


@pytest.mark.parametrize(
    "location",
    [
        "s3://victim-bucket/data/commits-probe",
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-10/q",  # a sibling directory, same name prefix
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-1/../../../../victim",
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-1/./q",
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-1//q",
        "https://b/jobs/orders/checkpoints/0a1b2c3d-run-1/q",
    ],
)
def test_a_pointer_outside_the_jobs_checkpoint_directory_is_never_inspected(location: str) -> None:
    inspected: list[int] = []

    def committed(p: CheckpointPointer) -> bool:
        inspected.append(p.checkpoint_id)
        return True

    point = choose_restore_point([pointer(9, location), pointer(8)], committed, DIRECTORY)
    assert inspected == [8]
    assert (point.pointer, point.skipped, point.outside) == (pointer(8), (9,), (9,))
    assert point.why_skipped == "unusable checkpoints [9]: [9] outside the job's checkpoint directory"


@pytest.mark.parametrize(
    "location", [DIRECTORY, f"{DIRECTORY}/", "s3a://b/jobs/orders/checkpoints/0a1b2c3d-run-1/q"]
)
def test_the_directory_itself_and_what_lies_below_it_are_inspected(location: str) -> None:
    point = choose_restore_point([pointer(9, location)], lambda p: True, DIRECTORY)
    assert point.pointer == pointer(9, location)


def test_only_foreign_pointers_require_a_manual_restore_and_say_why() -> None:
    point = choose_restore_point([pointer(9, "s3://elsewhere/cp"), pointer(8)], lambda p: False, DIRECTORY)
    assert point.pointer is None
    assert point.unusable.startswith(
        "none of the retained checkpoints is usable (unusable checkpoints [9, 8]: [8] not complete in "
        "storage; [9] outside the job's checkpoint directory); manual restore required"
    )


def test_without_a_directory_the_operator_chose_no_pointer_is_inspected() -> None:
    point = choose_restore_point([pointer(9), pointer(8)], lambda p: pytest.fail("inspected"), None)
    assert (point.pointer, point.outside) == (None, (9, 8))


def test_the_directories_the_operator_chooses_are_exactly_those_it_recognises() -> None:
    uid, storage = "0a1b2c3d-0000-4000-8000-000000000001", "s3://b/jobs/orders/"
    assert checkpoint_directory(storage, uid, 1) == DIRECTORY
    assert is_checkpoint_directory(DIRECTORY, storage, uid)
    for location in (
        "s3://victim/checkpoints/0a1b2c3d-run-1",  # another storage
        "s3://b/jobs/orders/checkpoints/ffffffff-run-1",  # another job's uid
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-1/../../../../victim",
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-",
        "s3://b/jobs/orders/checkpoints/0a1b2c3d-run-\u0661",  # a digit, but not an ASCII one
    ):
        assert not is_checkpoint_directory(location, storage, uid), location
