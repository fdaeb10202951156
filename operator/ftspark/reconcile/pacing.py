"""How often passes come when nothing asks for one at once.

RefreshPacer: when a checkpoint report refreshes its job's status: a driver reports every micro-batch, and a
refresh is a whole pass (four reads and a status write), so refreshes are paced, not made per report.

Each job's refresh comes no sooner than `floor` seconds after its report (batches reported meanwhile ride
along), and all jobs' refreshes together come at most `per_second`: with n jobs checkpointing, a job's status
shows its newest checkpoint within max(floor, n / per_second) seconds, and the operator's requests for them
stay flat however many jobs checkpoint. The checkpoint itself is in the store the moment the driver wrote it:
recovery reads the store, never this status.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# The soonest a checkpoint shows in its job's status; also how often checkpoint records on S3 are polled.
CHECKPOINT_STATUS_DELAY = 5.0
# The default budget: at 5 requests a refresh, 100 requests a second however many jobs checkpoint, and
# every job's status within 5 s up to 100 checkpointing jobs (50 s at 1,000).
CHECKPOINT_REFRESHES_PER_SECOND = 20.0


class RefreshPacer(Generic[K]):
    def __init__(
        self, *, floor: float, per_second: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if floor < 0 or per_second <= 0:
            raise ValueError(f"floor {floor} must be >= 0 and per_second {per_second} > 0")
        self._floor, self._spacing, self._clock = floor, 1.0 / per_second, clock
        # Refreshes not yet due, by key. Slots are handed out in increasing order, so insertion order is due
        # order and the ones past are always at the front.
        self._scheduled: OrderedDict[K, float] = OrderedDict()
        self._last_slot = float("-inf")
        self._lock = threading.Lock()

    def delay(self, key: K) -> float | None:
        """Seconds from now until the key's refresh, or None when one is scheduled already (this report
        rides along with it)."""
        with self._lock:
            now = self._clock()
            while self._scheduled and next(iter(self._scheduled.values())) <= now:
                self._scheduled.popitem(last=False)
            if key in self._scheduled:
                return None
            self._last_slot = max(now + self._floor, self._last_slot + self._spacing)
            self._scheduled[key] = self._last_slot
            return self._last_slot - now


# The longest a waiting job goes unlooked-at while its passes change nothing (a watch event wakes it sooner).
WAIT_CEILING_SECONDS = 8.0
_DOUBLINGS = 16  # far past any ceiling; keeps the count (and the float) bounded


@dataclass(frozen=True)
class Requeue:
    """A pass's answer: when to look again (None: only when something changes), and whether the pass only
    waited (Decision.waiting) and changed nothing: no status write, no action."""

    after: float | None
    idle_wait: bool = False


class WaitBackoff(Generic[K]):
    """A job waiting for a pod to go asks to be looked at again in a second. While its passes change
    nothing, each wait doubles up to `ceiling`: the watch events that end a wait still wake it at once, and
    one tenant's thousand waiting jobs cost the operator passes every `ceiling` seconds, not every second.
    A pass that changes something, or asks for anything but a wait, starts the count again."""

    def __init__(self, *, ceiling: float = WAIT_CEILING_SECONDS) -> None:
        self._ceiling = ceiling
        self._idle: dict[K, int] = {}
        self._lock = threading.Lock()

    def after(self, key: K, requeue: Requeue) -> float | None:
        with self._lock:
            if not requeue.idle_wait or requeue.after is None:
                self._idle.pop(key, None)
                return requeue.after
            idle = self._idle[key] = min(self._idle.get(key, 0) + 1, _DOUBLINGS)
            return min(requeue.after * 2.0 ** (idle - 1), max(self._ceiling, requeue.after))
