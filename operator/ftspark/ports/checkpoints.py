"""Looking into a checkpoint directory (S3) before restoring from it."""

from __future__ import annotations

from typing import Protocol

from ftspark.domain.ha import CheckpointPointer


class CheckpointInspector(Protocol):
    def committed(self, pointer: CheckpointPointer) -> bool:
        """True when <location>/commits/<batch_id> exists: Spark finished that batch."""
