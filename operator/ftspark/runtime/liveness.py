"""The driver's progress watchdog (domain/liveness.py says what counts as stuck).

Spark's listener thread records each query's signs of life; a thread of this Python process checks them
every second. It runs in Python, not in the JVM, so it keeps running when the JVM hangs (stopped, deadlocked,
in an endless GC); a stuck query makes it call on_stuck once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ftspark.domain.liveness import Stuck, stuck

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0


class SignsOfLife:
    """The monotonic time each running query (by name) was last heard from."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}
        self._names: dict[str, str] = {}  # query id -> name, from its start

    def started(self, query_id: str, name: str | None) -> None:
        with self._lock:
            self._names[query_id] = name or query_id
            self._seen[query_id] = self._clock()

    def heard(self, query_id: str) -> None:
        with self._lock:
            if query_id in self._seen:  # not after its end: a late event must not bring it back
                self._seen[query_id] = self._clock()

    def ended(self, query_id: str) -> None:
        with self._lock:
            self._seen.pop(query_id, None)

    def stuck(self, timeout: float) -> Stuck | None:
        with self._lock:
            found = stuck(self._seen, self._clock(), timeout)
            return None if found is None else Stuck(self._names[found.query], found.silent_seconds)


class Watchdog:
    def __init__(self, signs: SignsOfLife, timeout: float, on_stuck: Callable[[Stuck], None]) -> None:
        self._signs, self._timeout, self._on_stuck = signs, timeout, on_stuck
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="progress-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_SECONDS):
            found = self._signs.stuck(self._timeout)
            if found is not None:
                log.error("query %s: no sign of life for %.0f s", found.query, found.silent_seconds)
                self._on_stuck(found)
                return
