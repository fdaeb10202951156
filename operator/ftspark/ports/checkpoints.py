"""Looking into a checkpoint directory (S3) before restoring from it.

Implementation: adapters.s3.inspector.S3CheckpointInspector, wired in app.main. A new one (another storage)
must pass the restore tests of tests/integration/test_operator.py (the newest checkpoint really there wins;
none usable asks for a manual restore); domain.recovery makes the choice (tests/unit/test_recovery.py).
"""

from __future__ import annotations

from typing import Protocol

from ftspark.domain.ha import CheckpointPointer


class CheckpointInspector(Protocol):
    def committed(self, pointer: CheckpointPointer) -> bool:
        """True when <location>/commits/<batch_id> exists: Spark finished that batch."""
