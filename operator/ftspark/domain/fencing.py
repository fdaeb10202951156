"""Fencing tokens (docs/architecture.md, "Fencing"): every store write carries the writer's epoch; an older
epoch is refused.

Two scopes fence independently: the operator leader (term = the Lease's leaseTransitions when it was
acquired, never below the term floor kept beside the Lease, so that a re-created Lease does not count from 0
again) and the job's driver (term = its attempt number, advanced by the operator before the attempt's pod
is created). A stored record keeps the highest term it has seen per scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

FenceScope = Literal["operator", "driver"]


@dataclass(frozen=True)
class Epoch:
    scope: FenceScope
    term: int
    holder: str

    def __str__(self) -> str:
        return f"{self.scope} term {self.term} ({self.holder})"


class FencedOutError(Exception):
    """This writer may never write the record again. Nothing was changed."""


class NotLeadingError(FencedOutError):
    """A write was about to be made after leadership was lost: refused before it reaches a store."""


class StaleEpochError(FencedOutError):
    """A write from an epoch older than the one the record has already seen. Nothing was changed."""

    def __init__(self, record: str, epoch: Epoch, recorded_term: int) -> None:
        super().__init__(
            f"{record}: write by {epoch} refused, {epoch.scope} term {recorded_term} already wrote"
        )
        self.record = record
        self.epoch = epoch
        self.recorded_term = recorded_term


class RetiredRecordError(FencedOutError):
    """The record is gone (its job was deleted) and this writer may not bring it back."""

    def __init__(self, record: str, epoch: Epoch) -> None:
        super().__init__(f"{record}: write by {epoch} refused, the record was deleted")
        self.record = record
        self.epoch = epoch


def admit(record: str, fences: Mapping[str, int], epoch: Epoch) -> dict[str, int]:
    """The record's fences after a write by epoch, or StaleEpochError if epoch is stale."""
    recorded = fences.get(epoch.scope, -1)
    if epoch.term < recorded:
        raise StaleEpochError(record, epoch, recorded)
    return {**fences, epoch.scope: max(recorded, epoch.term)}
