"""Which checkpoint a new attempt restores.

The newest retained pointer whose checkpoint is really there (commits/<batch> exists); an unusable latest one
falls back to the next older one. When pointers exist but none is usable, the answer is "manual restore
required", never a silent start from nothing (a Flink lesson).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ftspark.domain.ha import CheckpointPointer


@dataclass(frozen=True)
class RestorePoint:
    pointer: CheckpointPointer | None
    skipped: tuple[int, ...]  # ids of newer pointers found unusable

    @property
    def unusable(self) -> str:
        """Why a manual restore is required (pointers exist, none is usable); empty when restorable."""
        if self.pointer is not None or not self.skipped:
            return ""
        return (
            f"none of the retained checkpoints {list(self.skipped)} is complete in storage; manual restore "
            "required (set spec.initialSavepoint, or use upgradeMode: stateless to start without state)"
        )


def choose_restore_point(
    pointers: Sequence[CheckpointPointer], committed: Callable[[CheckpointPointer], bool]
) -> RestorePoint:
    """pointers newest first; committed(pointer) checks the checkpoint directory."""
    skipped: list[int] = []
    for pointer in pointers:
        if committed(pointer):
            return RestorePoint(pointer, tuple(skipped))
        skipped.append(pointer.checkpoint_id)
    return RestorePoint(None, tuple(skipped))
