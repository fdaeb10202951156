"""A work queue with client-go's guarantees: a key waits in the queue at most once, is never handled by two
workers at once, and a key added while being handled is handled again afterwards. add_after() schedules it.

Two lanes, urgent first: a driver that failed, a job deleted or a user's change must not wait behind the bulk
of a burst (thousands of new jobs, a new leader's first pass over every job), which can take minutes to work
through. A key keeps one place in the queue: an urgent add moves a queued key to the urgent lane, never back.
A key handled from the urgent lane stays urgent for its follow-ups due within `urgent_follow_up_seconds` (the
restart delay after a failure, the next step of a stop): a transition in progress is finished first; its
later periodic checks are bulk again.

Within each lane, keys are taken in turn by tenant (`tenant_of`, the job's namespace): one namespace's
thousand new or failing jobs wait behind each other, not in front of another namespace's one.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

URGENT_FOLLOW_UP_SECONDS = 60.0


def _one_tenant(_: object) -> None:
    return None


class _FairLane(Generic[K]):
    """Keys in order within each tenant, the tenants taking turns."""

    def __init__(self, tenant_of: Callable[[K], Hashable]) -> None:
        self._tenant_of = tenant_of
        self._keys: dict[Hashable, deque[K]] = {}
        self._turns: deque[Hashable] = deque()  # the tenants with keys, next first

    def append(self, key: K) -> None:
        tenant = self._tenant_of(key)
        if tenant not in self._keys:
            self._keys[tenant] = deque()
            self._turns.append(tenant)
        self._keys[tenant].append(key)

    def popleft(self) -> K:
        tenant = self._turns.popleft()
        keys = self._keys[tenant]
        key = keys.popleft()
        if keys:
            self._turns.append(tenant)
        else:
            del self._keys[tenant]
        return key

    def __bool__(self) -> bool:
        return bool(self._turns)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        urgent_follow_up_seconds: float = URGENT_FOLLOW_UP_SECONDS,
        tenant_of: Callable[[K], Hashable] = _one_tenant,
    ) -> None:
        self._clock = clock
        self._urgent_follow_up_seconds = urgent_follow_up_seconds
        # Lanes hold a key's entries; the key's current lane is _queued[key] (True: urgent). An entry left in
        # the bulk lane by a move to the urgent one, or by a key handled since, is skipped when reached.
        self._urgent_lane: _FairLane[K] = _FairLane(tenant_of)
        self._bulk_lane: _FairLane[K] = _FairLane(tenant_of)
        self._queued: dict[K, bool] = {}
        self._processing: dict[K, bool] = {}  # taken from the urgent lane?
        self._dirty: dict[K, bool] = {}  # added while being processed, urgently?
        self._delayed: list[tuple[float, int, K]] = []
        # The earliest scheduled time per key (later schedules are dropped), and whether it is urgent.
        self._due: dict[K, tuple[float, bool]] = {}
        self._sequence = itertools.count()
        self._changed = threading.Condition()
        self._shut_down = False

    def add(self, key: K, *, urgent: bool = False) -> None:
        with self._changed:
            self._add_locked(key, urgent)

    def add_after(self, key: K, seconds: float, *, urgent: bool = False) -> None:
        with self._changed:
            self._schedule_locked(key, seconds, urgent)

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to handle, urgent first (call done(key) after), or None on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._changed:
            while True:
                if self._shut_down:
                    return None
                self._promote_due_locked()
                key = self._next_locked()
                if key is not None:
                    return key
                wait = self._delayed[0][0] - self._clock() if self._delayed else None
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._changed.wait(wait)

    def done(self, key: K, *, again_after: float | None = None) -> None:
        """The key was handled; again_after: handle it again in that many seconds (None: only on an add)."""
        with self._changed:
            urgent = self._processing.pop(key)
            if key in self._dirty:
                self._add_locked(key, self._dirty.pop(key))
            if again_after is not None:
                follow_up = urgent and again_after <= self._urgent_follow_up_seconds
                self._schedule_locked(key, again_after, follow_up)

    def shut_down(self) -> None:
        with self._changed:
            self._shut_down = True
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._queued) + len(self._due)

    def _add_locked(self, key: K, urgent: bool) -> None:
        if key in self._processing:
            self._dirty[key] = self._dirty.get(key, False) or urgent
        elif key not in self._queued or (urgent and not self._queued[key]):
            self._queued[key] = urgent
            (self._urgent_lane if urgent else self._bulk_lane).append(key)
            self._changed.notify()

    def _schedule_locked(self, key: K, seconds: float, urgent: bool) -> None:
        if seconds <= 0:
            self._add_locked(key, urgent)
            return
        due = self._clock() + seconds
        earliest, already_urgent = self._due.get(key, (float("inf"), False))
        if due < earliest:
            self._due[key] = (due, urgent or already_urgent)
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            self._changed.notify()
        elif urgent and not already_urgent:
            self._due[key] = (earliest, True)  # the earlier schedule stands, urgently

    def _next_locked(self) -> K | None:
        for lane, urgent in ((self._urgent_lane, True), (self._bulk_lane, False)):
            while lane:
                key = lane.popleft()
                if self._queued.get(key) is urgent:
                    del self._queued[key]
                    self._processing[key] = urgent
                    return key
        return None

    def _promote_due_locked(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            scheduled = self._due.get(key)
            if scheduled is not None and scheduled[0] == due:  # else superseded by an earlier schedule
                del self._due[key]
                self._add_locked(key, scheduled[1])
