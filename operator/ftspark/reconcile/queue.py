"""A work queue with client-go's guarantees: a key waits in the queue at most once, is never handled by two
workers at once, and a key added while being handled is handled again afterwards. add_after() schedules it."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ready: deque[K] = deque()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()  # added while being processed
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # the earliest scheduled time per key; later schedules are dropped
        self._sequence = itertools.count()
        self._changed = threading.Condition()
        self._shut_down = False

    def add(self, key: K) -> None:
        with self._changed:
            self._add_locked(key)

    def add_after(self, key: K, seconds: float) -> None:
        if seconds <= 0:
            self.add(key)
            return
        with self._changed:
            due = self._clock() + seconds
            if due < self._due.get(key, float("inf")):
                self._due[key] = due
                heapq.heappush(self._delayed, (due, next(self._sequence), key))
                self._changed.notify()

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to handle (call done(key) after), or None on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._changed:
            while True:
                if self._shut_down:
                    return None
                self._promote_due_locked()
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                wait = self._delayed[0][0] - self._clock() if self._delayed else None
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._changed.wait(wait)

    def done(self, key: K) -> None:
        with self._changed:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self._add_locked(key)

    def shut_down(self) -> None:
        with self._changed:
            self._shut_down = True
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._ready) + len(self._delayed)

    def _add_locked(self, key: K) -> None:
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._changed.notify()

    def _promote_due_locked(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:  # else superseded by an earlier schedule
                del self._due[key]
                self._add_locked(key)
