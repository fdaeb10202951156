"""The lock that leader election runs on (client-go's resourcelock.Interface) and the clock it trusts.

Implementations: adapters.k8s.lease_lock (a coordination.k8s.io/v1 Lease), the test double
ftspark.testing.leadership. A new lock must refuse a create or an update on a stale version with
ConflictError, as tests/integration/test_leader_election.py checks of the Lease (the elector itself is proven
on the in-memory lock by tests/unit/test_elector.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class LeaderElectionRecord:
    """The Lease's spec. Times are the writer's wall clock: informative only, never compared across hosts."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    leader_transitions: int


class ConflictError(Exception):
    """The lock changed since the version the write was based on (or was created meanwhile); no write."""


class LockUnavailableError(Exception):
    """The lock could not be read or written (unreachable, refused, timed out); nothing known written."""


class LeaseLock(Protocol):
    @property
    def identity(self) -> str:
        """Who this process is in the election."""

    def describe(self) -> str:
        """The lock's name for logs, e.g. namespace/name."""

    def get(self) -> tuple[LeaderElectionRecord, str] | None:
        """The record and its version, or None if the lock does not exist."""

    def create(self, record: LeaderElectionRecord) -> str:
        """Create the lock; ConflictError if it exists. Returns the new version."""

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        """Replace the record if the lock is still at version, else ConflictError. Returns the new version."""

    def term_floor(self) -> int | None:
        """The highest term (leader_transitions) ever acted on with this lock, kept apart from the lock
        object so that it survives the lock's deletion and re-creation; None if none ever was, -1 if one is
        there but unreadable. The elector ignores any floor no int32 term could follow (leader.elector)."""

    def raise_term_floor(self, term: int) -> None:
        """Record that term (above the floor term_floor() last returned) is acted on: after the lock holds it,
        before its holder acts; ConflictError if the floor moved since that read (a floor never goes down)."""


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: the only time leader election trusts."""

    def wall(self) -> datetime:
        """Aware wall-clock time, written into records for people to read."""

    def sleep(self, seconds: float, interrupt: threading.Event) -> None:
        """Wait seconds, or less if interrupt gets set."""
