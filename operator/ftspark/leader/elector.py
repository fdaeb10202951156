"""Leader election on a LeaseLock: client-go's algorithm (tools/leaderelection), in a synchronous loop.

Only locally observed time is trusted: a record counts as held by another until lease_duration has passed on
our monotonic clock since we first saw that exact record, whatever times the record itself claims. So clock
skew between hosts cannot shorten a lease. A leader stops acting once renew_deadline has passed since its
last successful renew; renew_deadline < lease_duration keeps that before any follower may take over.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator

from ftspark.domain.fencing import Epoch
from ftspark.metrics import IGNORED_TERM_FLOORS
from ftspark.ports.leadership import (
    Clock,
    ConflictError,
    LeaderElectionRecord,
    LeaseLock,
    LockUnavailableError,
)
from ftspark.protocol import MAX_TERM

log = logging.getLogger(__name__)

# client-go's JitterFactor: acquire attempts wait retry_period * (1 + random * 1.2), so that followers
# do not retry in lockstep.
JITTER_FACTOR = 1.2


class LeaderElectionConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    identity: str = Field(min_length=1)
    # Whole seconds: the Lease stores leaseDurationSeconds as an integer, and followers wait what it says.
    lease_duration: PositiveInt = 15
    renew_deadline: PositiveFloat = 10.0
    retry_period: PositiveFloat = 2.0

    @field_validator("renew_deadline")
    @classmethod
    def _deadline_inside_lease(cls, value: float, info: ValidationInfo) -> float:
        lease = info.data.get("lease_duration")
        if lease is not None and lease <= value:
            raise ValueError(f"renew_deadline ({value} s) must be less than lease_duration ({lease} s)")
        return value

    @field_validator("retry_period")
    @classmethod
    def _retries_inside_deadline(cls, value: float, info: ValidationInfo) -> float:
        deadline = info.data.get("renew_deadline")
        if deadline is not None and deadline <= value * JITTER_FACTOR:
            raise ValueError(
                f"retry_period ({value} s) times {JITTER_FACTOR} must be less than "
                f"renew_deadline ({deadline} s)"
            )
        return value


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float, interrupt: threading.Event) -> None:
        interrupt.wait(seconds)


def released(record: LeaderElectionRecord, wall: datetime) -> LeaderElectionRecord:
    """What a release writes: no holder, and the same count of transitions (the next holder's term is above
    every term handed out before)."""
    return LeaderElectionRecord(
        holder_identity="",
        lease_duration_seconds=1,
        acquire_time=wall,
        renew_time=wall,
        leader_transitions=record.leader_transitions,
    )


def release_for_ended_holder(lock: LeaseLock, holder: str, wall: datetime) -> bool:
    """Release the lock on behalf of a holder whose process is known to have ended, so that the next
    contender takes it at its next retry instead of waiting the lease out. Only while that holder still
    holds it: a compare-and-swap on the version read. False when another holds it (or nobody does, or it
    changed meanwhile): then there is nothing to release. A holder that may still run must never be released
    this way: that is what the lease's expiry is for."""
    found = lock.get()
    if found is None or found[0].holder_identity != holder:
        return False
    record, version = found
    try:
        lock.update(released(record, wall), version)
    except ConflictError:
        return False
    return True


def _ignore_epoch(epoch: Epoch) -> None:
    pass


def _ignore() -> None:
    pass


def _ignore_identity(identity: str) -> None:
    pass


class LeaderElector:
    """Callbacks run on the thread that calls run(); on_stopped_leading returns once we stopped acting."""

    def __init__(
        self,
        config: LeaderElectionConfig,
        lock: LeaseLock,
        *,
        on_started_leading: Callable[[Epoch], None] = _ignore_epoch,
        on_stopped_leading: Callable[[], None] = _ignore,
        on_new_leader: Callable[[str], None] = _ignore_identity,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if lock.identity != config.identity:
            raise ValueError(f"lock identity {lock.identity!r} is not the config's {config.identity!r}")
        self._config = config
        self._lock = lock
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        self._version: str | None = None
        self._reported_leader = ""
        self._leading = False
        self._last_renew: float | None = None
        self._last_contact: float | None = None
        self._takeover_gap: float | None = None
        self._hold_off_until = 0.0  # acquired, but not to act before this (a lock re-created under a holder)
        self._floor_owed: int | None = None  # a term acquired and not yet recorded in the floor

    @property
    def epoch(self) -> Epoch | None:
        """The fencing epoch while leading: every write this leader makes carries it."""
        if not self._leading or self._observed is None:
            return None
        return Epoch(scope="operator", term=self._observed.leader_transitions, holder=self._config.identity)

    @property
    def takeover_gap(self) -> float | None:
        """At the last acquisition: seconds since the previous holder's last renew seen here (0: released)."""
        return self._takeover_gap

    def seconds_since_renew(self) -> float | None:
        """Seconds since the last successful acquire or renew while leading (liveness probe), else None."""
        if not self._leading or self._last_renew is None:
            return None
        return self._clock.now() - self._last_renew

    def seconds_since_contact(self) -> float | None:
        """Seconds since the lock last answered (leader or follower; readiness), None if it never did."""
        if self._last_contact is None:
            return None
        return self._clock.now() - self._last_contact

    def watch_renewals(
        self, stop: threading.Event, on_overdue: Callable[[float], None], interval: float = 0.2
    ) -> None:
        """Until stop is set, every interval: once the last renew while leading is older than the renew
        deadline, call on_overdue(seconds since it) and return. For a thread of its own: the elector checks
        its deadline only between calls, and a call hung in the network (a partition swallowing packets)
        would keep it leading past the deadline; nothing may act that long."""
        while not stop.is_set():
            since = self.seconds_since_renew()
            if since is not None and since > self._config.renew_deadline:
                on_overdue(since)
                return
            self._clock.sleep(interval, stop)

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead until stop is set (then release) or until renewing fails (then return at once)."""
        if not self._acquire(stop):
            return
        self._leading = True
        try:
            epoch = self.epoch
            assert epoch is not None
            log.info("%s: leading %s as %s", self._config.identity, self._lock.describe(), epoch)
            self._on_started_leading(epoch)
            still_held = self._renew(stop)
        finally:
            self._leading = False
            self._on_stopped_leading()
        if still_held:
            self._release()

    def observe(self) -> None:
        """Read the lock, writing nothing: its observation clock starts at the first read and restarts only
        when the record changes, so a contender that watched a lease lapse takes it at its first attempt
        instead of a lease duration after it. Not while run() runs. LockUnavailableError if unreadable."""
        current = self._lock.get()
        if current is not None:
            self._note(*current)

    # -- the loops ---------------------------------------------------------------------------------------

    def _acquire(self, stop: threading.Event) -> bool:
        retry = self._config.retry_period
        while not stop.is_set():
            started = self._clock.now()
            if not self._attempt():
                self._clock.sleep(retry * (1 + self._rng.random() * JITTER_FACTOR), stop)
                continue
            self._last_renew = started
            if started >= self._hold_off_until:
                return True
            self._clock.sleep(min(retry, self._hold_off_until - started), stop)  # hold it, renewing
        return False

    def _renew(self, stop: threading.Event) -> bool:
        """Renew every retry_period; True when stopped while still holding, False once leadership is lost."""
        assert self._last_renew is not None
        while True:
            deadline = self._last_renew + self._config.renew_deadline
            self._clock.sleep(min(self._config.retry_period, max(0.0, deadline - self._clock.now())), stop)
            if stop.is_set():
                return True
            started = self._clock.now()
            if started >= deadline:
                log.error(
                    "%s: no renew within %s s: stopping", self._config.identity, self._config.renew_deadline
                )
                return False
            if self._attempt():
                self._last_renew = started
            elif not self._is_leader():
                # Someone else's record: deposed for sure, no point waiting for the deadline.
                log.error("%s: lease taken over by %s", self._config.identity, self._reported_leader)
                return False

    def _attempt(self) -> bool:
        try:
            return self._try_acquire_or_renew() and self._settle_floor()
        except (ConflictError, LockUnavailableError) as error:
            log.warning("%s: %s: %s", self._config.identity, self._lock.describe(), error)
            return False
        finally:
            self._report_transition()

    # -- client-go's tryAcquireOrRenew -------------------------------------------------------------------

    def _try_acquire_or_renew(self) -> bool:
        now = self._clock.now()
        wall = self._clock.wall()
        record = LeaderElectionRecord(
            holder_identity=self._config.identity,
            lease_duration_seconds=self._config.lease_duration,
            acquire_time=wall,
            renew_time=wall,
            leader_transitions=0,
        )

        # 1. Fast path: the leader updates optimistically from the version it wrote last.
        held, held_version = self._observed, self._version
        if held is not None and held_version is not None and self._is_leader() and self._lease_valid(now):
            kept = replace(record, acquire_time=held.acquire_time, leader_transitions=held.leader_transitions)
            try:
                self._observe(kept, self._lock.update(kept, held_version))
                self._last_contact = now
                return True
            except (ConflictError, LockUnavailableError) as error:
                log.info("%s: optimistic renew failed (%s), reading the lock", self._config.identity, error)

        # 2. Read the record, or create it.
        current = self._lock.get()
        self._last_contact = now
        if current is None:
            # A lock deleted and re-created (by hand, a namespace restored) starts above every term handed out
            # before: the HA records' fences refuse lower terms, and a term must never be reused.
            term, floor = self._next_term(0)
            record = replace(record, leader_transitions=term)
            self._observe(record, self._lock.create(record))
            self._floor_owed = term
            if floor is not None and not self._leading:
                # Someone held the deleted lock, and may act until its renew deadline without seeing the
                # deletion: act a lease duration from now, as a takeover of its record would have waited.
                self._hold_off_until = now + self._config.lease_duration
            return True
        observed, version = current

        # 3. Restart the observation clock only when the record changed since we last saw it.
        self._note(observed, version)
        if observed.holder_identity and self._lease_valid(now) and not self._is_leader():
            return False

        # 4. Free, expired, or ours: take it (a new holder is a new transition, a new fencing term).
        silent_for = 0.0
        taking_over = not self._is_leader()
        if taking_over:
            record = replace(record, leader_transitions=self._next_term(observed.leader_transitions + 1)[0])
            silent_for = now - self._observed_time
        else:
            record = replace(
                record, acquire_time=observed.acquire_time, leader_transitions=observed.leader_transitions
            )
        self._observe(record, self._lock.update(record, version))
        if taking_over:
            self._floor_owed = record.leader_transitions
        if not self._leading:
            self._takeover_gap = silent_for if observed.holder_identity else 0.0
        return True

    def _next_term(self, at_least: int) -> tuple[int, int | None]:
        """A term above every one handed out, and the floor (None: no term was ever handed out, or the lock
        keeps no floor). The floor is raised only once the lock is ours (_settle_floor): raised by an attempt
        that then lost the race for the lock, it would sit above the holder's term, and drivers refuse every
        request written below the floor."""
        floor = self._term_floor(report=True)
        return (at_least if floor is None else max(at_least, floor + 1)), floor

    def _term_floor(self, *, report: bool) -> int | None:
        """The lock's floor, or -1 (a floor exists, but no term of it is known) when it holds no term a
        Lease's could follow: unreadable (the lock says -1), or at or past MAX_TERM, where no next term fits
        in leaseTransitions and no replica would ever lead again. No operator writes such a floor (its terms
        come from the Lease), and only admins write in its namespace: so it is ignored, reported, and replaced
        by the next term acted on, rather than obeyed forever. What it loses is the guard against reusing a
        term after the Lease itself is deleted, for that one transition."""
        floor = self._lock.term_floor()
        if floor is None or 0 <= floor < MAX_TERM:
            return floor
        if report:
            log.error(
                "%s: the term floor of %s holds no term a Lease can follow (%d): ignored, and replaced when "
                "a term is acquired",
                self._config.identity,
                self._lock.describe(),
                floor,
            )
            IGNORED_TERM_FLOORS.inc()
        return -1

    def _settle_floor(self) -> bool:
        """Before acting on a term just acquired: the floor records it (only upward), so a lock deleted and
        re-created never hands it out again. A term that never acted needs no record: a crash before this
        loses nothing. False (do not act yet) while the floor cannot be written."""
        owed = self._floor_owed
        if owed is None:
            return True
        floor = self._term_floor(report=False)  # also what the raise compares and swaps
        if floor is not None and floor > owed:
            log.error("%s: term %d is below the floor %d: not acting", self._config.identity, owed, floor)
            return False
        if floor != owed:
            self._lock.raise_term_floor(owed)
        self._floor_owed = None
        return True

    def _release(self) -> None:
        """Give the lease up on graceful shutdown so a follower takes over at its next retry."""
        if self._observed is None or self._version is None or not self._is_leader():
            return
        record = released(self._observed, self._clock.wall())
        try:
            self._observe(record, self._lock.update(record, self._version))
        except (ConflictError, LockUnavailableError) as error:
            log.warning("%s: could not release %s: %s", self._config.identity, self._lock.describe(), error)
            return
        log.info("%s: released %s", self._config.identity, self._lock.describe())

    def _observe(self, record: LeaderElectionRecord, version: str) -> None:
        self._observed = record
        self._version = version
        self._observed_time = self._clock.now()

    def _note(self, observed: LeaderElectionRecord, version: str) -> None:
        """A record read: the observation clock restarts only if it changed since the last read."""
        if observed != self._observed:
            self._observe(observed, version)
        else:
            self._version = version

    def _lease_valid(self, now: float) -> bool:
        assert self._observed is not None
        return self._observed_time + self._observed.lease_duration_seconds > now

    def _is_leader(self) -> bool:
        return self._observed is not None and self._observed.holder_identity == self._config.identity

    def _report_transition(self) -> None:
        holder = self._observed.holder_identity if self._observed is not None else ""
        # A released lease has no leader to announce.
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            self._on_new_leader(holder)
