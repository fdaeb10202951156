"""Choosing the checkpoint a new attempt restores."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ftspark.domain.ha import CheckpointPointer
from ftspark.domain.recovery import choose_restore_point


def pointer(checkpoint_id: int) -> CheckpointPointer:
    return CheckpointPointer(
        checkpoint_id=checkpoint_id,
        batch_id=checkpoint_id,
        location="s3://b/cp",
        completed_at=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
    )


def test_newest_usable_pointer_wins_and_skipped_ones_are_named() -> None:
    point = choose_restore_point([pointer(9), pointer(8), pointer(7)], lambda p: p.checkpoint_id <= 7)
    assert point.pointer == pointer(7)
    assert point.skipped == (9, 8)


def test_no_pointers_means_a_fresh_start() -> None:
    point = choose_restore_point([], lambda p: True)
    assert point.pointer is None
    assert point.unusable == ""


def test_pointers_without_any_usable_checkpoint_require_a_manual_restore() -> None:
    point = choose_restore_point([pointer(9), pointer(8)], lambda p: False)
    assert point.pointer is None
    assert re.search(r"\[9, 8\].*manual restore required", point.unusable)
