"""Leader election on the in-memory lock, in virtual time: other contenders are scripted on the fake clock."""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from ftspark.domain.fencing import Epoch
from ftspark.leader.elector import LeaderElectionConfig, LeaderElector, release_for_ended_holder
from ftspark.ports.leadership import LeaderElectionRecord, LockUnavailableError
from ftspark.protocol import MAX_TERM
from ftspark.testing.leadership import InMemoryLease, InMemoryLeaseLock

CONFIG = {"lease_duration": 15, "renew_deadline": 10.0, "retry_period": 2.0}
MAX_RETRY_WAIT = 2.0 * (1 + 1.2)
EPOCH_ZERO = datetime(2025, 1, 1, tzinfo=UTC)


class FakeClock:
    """Virtual time: sleep jumps ahead, running the actions scheduled on the way (at their times)."""

    def __init__(self, limit: float = 1000.0) -> None:
        self._now = 0.0
        self._limit = limit
        self._order = itertools.count()
        self._actions: list[tuple[float, int, Callable[[], None]]] = []

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return EPOCH_ZERO + timedelta(seconds=self._now)

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._actions, (when, next(self._order), action))

    def sleep(self, seconds: float, interrupt: threading.Event) -> None:
        end = self._now + seconds
        while self._actions and self._actions[0][0] <= end and not interrupt.is_set():
            when, _, action = heapq.heappop(self._actions)
            self._now = max(self._now, when)
            action()
        if not interrupt.is_set():
            self._now = end
        if self._now > self._limit:
            raise AssertionError(f"virtual time ran past {self._limit} s: the elector never returned")


class FlakyLock(InMemoryLeaseLock):
    """The in-memory lock, unreachable while down; remembers when updates last went through."""

    def __init__(self, lease: InMemoryLease, identity: str, clock: FakeClock) -> None:
        super().__init__(lease, identity)
        self.down = False
        self.last_update: float | None = None
        self._clock = clock

    def get(self) -> tuple[LeaderElectionRecord, str] | None:
        if self.down:
            raise LockUnavailableError("down")
        return super().get()

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        if self.down:
            raise LockUnavailableError("down")
        version = super().update(record, version)
        self.last_update = self._clock.now()
        return version


@dataclass
class Recorder:
    clock: FakeClock
    events: list[tuple[float, str, object]] = field(default_factory=list)

    def started(self, epoch: Epoch) -> None:
        self.events.append((self.clock.now(), "started", epoch))

    def stopped(self) -> None:
        self.events.append((self.clock.now(), "stopped", None))

    def new_leader(self, identity: str) -> None:
        self.events.append((self.clock.now(), "new_leader", identity))

    def times(self, kind: str) -> list[float]:
        return [when for when, event, _ in self.events if event == kind]

    def epochs(self) -> list[object]:
        return [epoch for _, event, epoch in self.events if event == "started"]


def elector(lock: InMemoryLeaseLock, clock: FakeClock, recorder: Recorder) -> LeaderElector:
    return LeaderElector(
        LeaderElectionConfig(identity=lock.identity, **CONFIG),
        lock,
        on_started_leading=recorder.started,
        on_stopped_leading=recorder.stopped,
        on_new_leader=recorder.new_leader,
        clock=clock,
        rng=random.Random(7),
    )


def write(
    lease: InMemoryLease, holder: str, renew_time: datetime, transitions: int, duration: int = 15
) -> None:
    """Another contender's write, whatever the lease holds now."""
    record = LeaderElectionRecord(holder, duration, renew_time, renew_time, transitions)
    current = lease.get()
    if current is None:
        lease.create(record)
    else:
        lease.update(record, current[1])


def record_of(lease: InMemoryLease) -> LeaderElectionRecord:
    current = lease.get()
    assert current is not None
    return current[0]


def test_acquires_a_free_lease_renews_it_and_releases_it_on_stop() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    leader = elector(InMemoryLeaseLock(lease, "a"), clock, recorder)
    seen: list[tuple[LeaderElectionRecord, float | None, Epoch | None]] = []
    clock.at(5.0, lambda: seen.append((record_of(lease), leader.seconds_since_renew(), leader.epoch)))
    clock.at(7.0, stop.set)

    leader.run(stop)

    assert recorder.events == [
        (0.0, "new_leader", "a"),
        (0.0, "started", Epoch(scope="operator", term=0, holder="a")),
        (7.0, "stopped", None),
    ]
    held, since_renew, epoch = seen[0]
    assert held.holder_identity == "a"
    assert held.acquire_time == EPOCH_ZERO
    assert held.renew_time == EPOCH_ZERO + timedelta(seconds=4)
    assert since_renew == 1.0
    assert epoch == Epoch(scope="operator", term=0, holder="a")
    released = record_of(lease)
    assert (released.holder_identity, released.lease_duration_seconds, released.leader_transitions) == (
        "",
        1,
        0,
    )
    assert leader.epoch is None
    assert leader.seconds_since_renew() is None


def test_follower_does_not_acquire_while_the_holder_renews() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "other", clock.wall(), transitions=3)
    for second in range(2, 60, 2):
        clock.at(second, lambda: write(lease, "other", clock.wall(), transitions=3))
    clock.at(60.0, stop.set)

    elector(InMemoryLeaseLock(lease, "b"), clock, recorder).run(stop)

    assert recorder.events == [(0.0, "new_leader", "other")]
    assert record_of(lease).holder_identity == "other"


def test_takes_over_after_a_lease_duration_of_local_silence_whatever_the_remote_clock_says() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    # The old holder's clock runs a day ahead; then it dies.
    write(lease, "other", clock.wall() + timedelta(days=1), transitions=3)
    clock.at(40.0, stop.set)

    elector(InMemoryLeaseLock(lease, "b"), clock, recorder).run(stop)

    [took_over] = recorder.times("started")
    assert 15.0 <= took_over <= 15.0 + MAX_RETRY_WAIT
    assert recorder.epochs() == [Epoch(scope="operator", term=4, holder="b")]
    assert [who for _, event, who in recorder.events if event == "new_leader"] == ["other", "b"]


def test_a_changed_record_restarts_the_wait() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "other", clock.wall(), transitions=0)
    # One last renew at 10 s: the follower must wait 15 s from when it sees that, not from 0.
    clock.at(10.0, lambda: write(lease, "other", clock.wall(), transitions=0))
    clock.at(40.0, stop.set)

    elector(InMemoryLeaseLock(lease, "b"), clock, recorder).run(stop)

    [took_over] = recorder.times("started")
    assert 25.0 <= took_over <= 25.0 + 2 * MAX_RETRY_WAIT


def test_a_contender_that_watched_a_lease_lapse_takes_it_at_its_first_attempt() -> None:
    """A standby driver reads the Lease while it waits, and writes nothing: promoted after the holder died,
    it takes the Lease at once instead of a lease duration after its first read."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "job-1-driver@1", clock.wall(), transitions=1)
    standby = elector(InMemoryLeaseLock(lease, "job-2-driver@2"), clock, recorder)
    before = lease.get()
    standby.observe()
    assert lease.get() == before, "observing writes nothing"
    clock.sleep(20.0, threading.Event())  # the holder died at 0; the standby is promoted at 20
    clock.at(30.0, stop.set)

    standby.run(stop)

    assert recorder.times("started") == [20.0]
    assert standby.takeover_gap == 20.0


def test_a_renew_after_the_last_observation_restarts_the_wait() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "job-1-driver@1", clock.wall(), transitions=1)
    standby = elector(InMemoryLeaseLock(lease, "job-2-driver@2"), clock, recorder)
    standby.observe()
    clock.at(10.0, lambda: write(lease, "job-1-driver@1", clock.wall(), transitions=1))
    clock.sleep(20.0, threading.Event())
    clock.at(60.0, stop.set)

    standby.run(stop)

    [took_over] = recorder.times("started")
    assert 35.0 <= took_over <= 35.0 + MAX_RETRY_WAIT, "15 s after it saw the renew, at 20"


def test_a_released_lease_is_taken_at_the_next_retry_with_the_next_term() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "other", clock.wall(), transitions=4)
    for second in range(2, 10, 2):
        clock.at(second, lambda: write(lease, "other", clock.wall(), transitions=4))
    clock.at(10.0, lambda: write(lease, "", clock.wall(), transitions=4, duration=1))
    clock.at(20.0, stop.set)

    elector(InMemoryLeaseLock(lease, "b"), clock, recorder).run(stop)

    [took_over] = recorder.times("started")
    assert 10.0 < took_over <= 10.0 + MAX_RETRY_WAIT
    assert recorder.epochs() == [Epoch(scope="operator", term=5, holder="b")]


def test_a_lease_released_for_its_ended_holder_is_taken_at_the_next_retry() -> None:
    """The operator's fence and go: the holder died at 4 s (it renews no more); released for it at 5 s, the
    waiting contender takes it at its next retry instead of 15 s after it last saw it change."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "job-1-driver@1", clock.wall(), transitions=1)
    clock.at(2.0, lambda: write(lease, "job-1-driver@1", clock.wall(), transitions=1))
    releases: list[bool] = []
    operator = InMemoryLeaseLock(lease, "ftspark-operator")
    clock.at(5.0, lambda: releases.append(release_for_ended_holder(operator, "job-1-driver@1", clock.wall())))
    clock.at(20.0, stop.set)

    elector(InMemoryLeaseLock(lease, "job-2-driver@2"), clock, recorder).run(stop)

    assert releases == [True]
    [took_over] = recorder.times("started")
    assert 5.0 < took_over <= 5.0 + MAX_RETRY_WAIT
    assert recorder.epochs() == [Epoch(scope="operator", term=2, holder="job-2-driver@2")]


def test_a_release_for_an_ended_holder_never_touches_another_holders_lease() -> None:
    lease = InMemoryLease()
    operator = InMemoryLeaseLock(lease, "ftspark-operator")
    assert not release_for_ended_holder(operator, "job-1-driver@1", EPOCH_ZERO), "no lease: nothing to do"
    write(lease, "job-2-driver@2", EPOCH_ZERO, transitions=2)
    before = lease.get()

    assert not release_for_ended_holder(operator, "job-1-driver@1", EPOCH_ZERO)
    assert lease.get() == before, "the next attempt's lease is left as it is"


def test_a_release_loses_to_a_write_between_its_read_and_its_swap() -> None:
    """The compare-and-swap: a record that changed after the read (a new holder took it) is not released."""
    lease = InMemoryLease()
    write(lease, "job-1-driver@1", EPOCH_ZERO, transitions=1)

    class TakenMeanwhile(InMemoryLeaseLock):
        def get(self) -> tuple[LeaderElectionRecord, str] | None:
            found = super().get()
            write(lease, "job-2-driver@2", EPOCH_ZERO, transitions=2)
            return found

    assert not release_for_ended_holder(
        TakenMeanwhile(lease, "ftspark-operator"), "job-1-driver@1", EPOCH_ZERO
    )
    assert record_of(lease).holder_identity == "job-2-driver@2"


class LongestWaits(random.Random):
    """Every jittered retry as long as it can be: retryPeriod x 2.2."""

    def random(self) -> float:
        return 1.0


@pytest.mark.parametrize("rng", [LongestWaits(), random.Random(7)], ids=["longest-waits", "random"])
def test_takeover_comes_a_lease_duration_to_that_plus_two_longest_retries_after_the_last_renew(
    rng: random.Random,
) -> None:
    """The bound the chart and docs/architecture.md state: the follower sees the last renew up to one
    jittered retry late, counts leaseDuration from then, and acts at its first retry after that."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "other", clock.wall(), transitions=0)
    last_renew = 0.1  # just after the follower's first look, then the holder dies
    clock.at(last_renew, lambda: write(lease, "other", clock.wall(), transitions=0))
    clock.at(60.0, stop.set)
    config = LeaderElectionConfig(identity="b", **CONFIG)
    lock = InMemoryLeaseLock(lease, "b")
    LeaderElector(config, lock, on_started_leading=recorder.started, clock=clock, rng=rng).run(stop)

    [took_over] = recorder.times("started")
    assert 15.0 <= took_over - last_renew <= 15.0 + 2 * MAX_RETRY_WAIT
    if isinstance(rng, LongestWaits):
        # Beyond leaseDuration + one longest retry: the old bound of the docs did not hold.
        assert took_over - last_renew > 15.0 + MAX_RETRY_WAIT


def test_each_new_holder_is_a_new_term_and_the_same_holder_keeps_its_term() -> None:
    clock, lease = FakeClock(), InMemoryLease()
    recorder = Recorder(clock)
    for holder in ("a", "b", "a"):
        stop = threading.Event()
        clock.at(clock.now() + 5.0, stop.set)
        elector(InMemoryLeaseLock(lease, holder), clock, recorder).run(stop)

    assert recorder.epochs() == [
        Epoch(scope="operator", term=0, holder="a"),
        Epoch(scope="operator", term=1, holder="b"),
        Epoch(scope="operator", term=2, holder="a"),
    ]


def test_terms_never_go_back_when_the_lease_is_deleted_and_re_created() -> None:
    clock, lease = FakeClock(), InMemoryLease()
    recorder = Recorder(clock)
    for holder in ("a", "b"):
        stop = threading.Event()
        clock.at(clock.now() + 5.0, stop.set)
        elector(InMemoryLeaseLock(lease, holder), clock, recorder).run(stop)
    lease.delete()  # by hand, or a namespace restored from a backup
    stop = threading.Event()
    clock.at(clock.now() + 20.0, stop.set)  # it acts a lease duration after it re-creates the lock
    elector(InMemoryLeaseLock(lease, "c"), clock, recorder).run(stop)
    lease.delete()
    write(lease, "intruder", clock.wall(), 0)  # a Lease re-created by hand at term 0, never renewed
    stop = threading.Event()
    clock.at(clock.now() + 40.0, stop.set)
    elector(InMemoryLeaseLock(lease, "d"), clock, recorder).run(stop)

    assert [(e.holder, e.term) for e in recorder.epochs() if isinstance(e, Epoch)] == [
        ("a", 0),
        ("b", 1),
        ("c", 2),
        ("d", 3),
    ]
    assert lease.term_floor == 3


def test_a_lock_deleted_under_its_holder_is_re_created_but_acted_on_only_after_a_lease_duration() -> None:
    """The holder does not see the deletion until its next renew, and may act until its renew deadline: a
    contender that re-creates the lock must not act before that, as it would not have taken over the record
    before a lease duration of silence."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    lease.raise_term_floor(4)
    write(lease, "a", clock.wall(), transitions=4)  # "a" holds the lock, renewing every 2 s until 20 s
    for renew in range(2, 21, 2):
        clock.at(float(renew), lambda: write(lease, "a", clock.wall(), transitions=4))
    clock.at(20.5, lease.delete)
    holder_acts_until = 20.0 + CONFIG["renew_deadline"]
    clock.at(60.0, stop.set)

    contender = elector(InMemoryLeaseLock(lease, "b"), clock, recorder)
    contender.run(stop)

    [started] = recorder.times("started")
    created = next(when for when, kind, who in recorder.events if kind == "new_leader" and who == "b")
    assert 20.5 < created < 20.5 + MAX_RETRY_WAIT, "the lock is re-created at once"
    assert started >= created + CONFIG["lease_duration"] > holder_acts_until, (created, started)
    assert [(e.holder, e.term) for e in recorder.epochs() if isinstance(e, Epoch)] == [("b", 5)]
    renewed = record_of(lease).renew_time
    assert renewed is not None and renewed >= clock.wall() - timedelta(seconds=CONFIG["retry_period"] * 2), (
        "held, renewed, while it waits to act"
    )


@pytest.mark.parametrize("forged", [2**62, MAX_TERM, -5])
def test_a_term_floor_no_lease_term_can_follow_does_not_stop_replicas_leading(forged: int) -> None:
    """leaseTransitions is an int32: obeyed, a floor at or past its largest value would make every next term
    one the Lease refuses, and no replica would ever lead again. It is ignored, counted, and replaced by the
    term acted on; the terms after it go on from there."""
    clock, lease = FakeClock(), InMemoryLease()
    recorder = Recorder(clock)
    write(lease, "a", clock.wall(), transitions=6)  # "a" led at term 6, then went quiet
    lease.term_floor = forged  # written into the operator's namespace by someone who should not have
    ignored = REGISTRY.get_sample_value("ftspark_term_floor_ignored_total") or 0.0
    for holder in ("b", "c"):
        stop = threading.Event()
        clock.at(clock.now() + 40.0, stop.set)
        elector(InMemoryLeaseLock(lease, holder), clock, recorder).run(stop)

    assert [(e.holder, e.term) for e in recorder.epochs() if isinstance(e, Epoch)] == [("b", 7), ("c", 8)]
    assert lease.term_floor == 8, "replaced by the term acted on, then raised as usual"
    assert REGISTRY.get_sample_value("ftspark_term_floor_ignored_total") == ignored + 1


def test_the_in_memory_lease_refuses_a_term_past_int32_as_the_api_server_does() -> None:
    lease = InMemoryLease()
    with pytest.raises(LockUnavailableError, match="leaseTransitions"):
        write(lease, "a", EPOCH_ZERO, transitions=MAX_TERM + 1)
    write(lease, "a", EPOCH_ZERO, transitions=MAX_TERM)


class RacingLock(InMemoryLeaseLock):
    """A contender's lock that loses its first takeover: the holder renews just before the write lands."""

    def __init__(self, lease: InMemoryLease, identity: str, holder: str, clock: FakeClock) -> None:
        super().__init__(lease, identity)
        self.floors_after_lost_race: list[int | None] = []
        self._holder, self._clock = holder, clock

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        if record.holder_identity == self.identity and not self.floors_after_lost_race:
            write(self._lease, self._holder, self._clock.wall(), transitions=3)
            try:
                return super().update(record, version)
            finally:
                self.floors_after_lost_race.append(self._lease.term_floor)
        return super().update(record, version)


def test_a_takeover_that_loses_the_race_leaves_the_term_floor_alone() -> None:
    """Drivers refuse requests written below the floor: a floor raised by an attempt that then lost the lock
    would leave the holder, still leading, below it and every one of its requests refused."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    lease.raise_term_floor(3)
    write(lease, "a", clock.wall(), transitions=3)  # "a" leads at term 3, then goes quiet
    lock = RacingLock(lease, "b", "a", clock)
    clock.at(60.0, stop.set)

    elector(lock, clock, recorder).run(stop)

    assert lock.floors_after_lost_race == [3], "the lost takeover raised nothing"
    assert [(e.holder, e.term) for e in recorder.epochs() if isinstance(e, Epoch)] == [("b", 4)]
    assert lease.term_floor == 4, "the won takeover recorded its term before acting"


def test_stops_leading_when_renewing_fails_until_the_renew_deadline() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    lock = FlakyLock(lease, "a", clock)
    leader = elector(lock, clock, recorder)
    health: list[float | None] = []

    def outage() -> None:
        lock.down = True

    clock.at(5.0, outage)
    clock.at(12.0, lambda: health.append(leader.seconds_since_renew()))

    leader.run(stop)

    assert not stop.is_set()
    assert lock.last_update == 4.0
    [stopped] = recorder.times("stopped")
    assert stopped == lock.last_update + 10.0
    assert health == [8.0]
    # Not released: it could not write, and the lease simply expires for the followers.
    assert record_of(lease).holder_identity == "a"


def test_a_deposed_leader_stops_at_its_next_renew() -> None:
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    clock.at(5.0, lambda: write(lease, "usurper", clock.wall(), transitions=1))

    elector(InMemoryLeaseLock(lease, "a"), clock, recorder).run(stop)

    assert recorder.times("stopped") == [6.0]
    assert recorder.events[-2:] == [(6.0, "new_leader", "usurper"), (6.0, "stopped", None)]
    assert record_of(lease).holder_identity == "usurper"


def test_contact_with_the_lock_is_tracked_for_leader_and_follower() -> None:
    """Readiness: the lock answered lately, whether this replica leads or follows."""
    clock, lease, stop = FakeClock(), InMemoryLease(), threading.Event()
    recorder = Recorder(clock)
    write(lease, "other", clock.wall(), transitions=0)
    for second in range(2, 60, 2):
        clock.at(second, lambda: write(lease, "other", clock.wall(), transitions=0))
    lock = FlakyLock(lease, "b", clock)
    follower = elector(lock, clock, recorder)
    assert follower.seconds_since_contact() is None
    seen: dict[float, float | None] = {}
    clock.at(10.0, lambda: seen.update({10.0: follower.seconds_since_contact()}))
    clock.at(20.0, lambda: setattr(lock, "down", True))
    clock.at(45.0, lambda: seen.update({45.0: follower.seconds_since_contact()}))
    clock.at(46.0, stop.set)

    follower.run(stop)

    assert seen[10.0] is not None and seen[10.0] <= MAX_RETRY_WAIT
    assert seen[45.0] is not None and 25.0 <= seen[45.0] <= 25.0 + MAX_RETRY_WAIT


def test_default_config_is_client_go_s() -> None:
    config = LeaderElectionConfig(identity="a")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10.0, 2.0)


@pytest.mark.parametrize(
    ("overrides", "field_name", "message"),
    [
        ({"identity": ""}, "identity", "at least 1 character"),
        ({"lease_duration": 0}, "lease_duration", "greater than 0"),
        ({"lease_duration": 2.5, "renew_deadline": 2.0, "retry_period": 0.5}, "lease_duration", "integer"),
        ({"renew_deadline": -1.0}, "renew_deadline", "greater than 0"),
        ({"retry_period": 0.0}, "retry_period", "greater than 0"),
        ({"lease_duration": 10, "renew_deadline": 10.0}, "renew_deadline", "less than lease_duration"),
        ({"renew_deadline": 2.4, "retry_period": 2.0}, "retry_period", "less than renew_deadline"),
    ],
)
def test_config_errors_name_the_field(overrides: dict[str, object], field_name: str, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        LeaderElectionConfig.model_validate({"identity": "a", **overrides})
    [error] = refused.value.errors()
    assert error["loc"] == (field_name,)
    assert message in error["msg"]


class HangingLock(InMemoryLeaseLock):
    """The in-memory lock whose first update hangs, as a call does in a partition that swallows packets."""

    def __init__(self, lease: InMemoryLease, identity: str) -> None:
        super().__init__(lease, identity)
        self.hanging = threading.Event()
        self.released = threading.Event()

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        self.hanging.set()
        self.released.wait(30)
        return super().update(record, version)


def test_the_renew_watchdog_tells_a_leader_whose_renew_hangs_at_its_deadline() -> None:
    clock, lock = FakeClock(), HangingLock(InMemoryLease(), "a")
    recorder = Recorder(clock)
    leader, stop = elector(lock, clock, recorder), threading.Event()
    running = threading.Thread(target=leader.run, args=(stop,), daemon=True)
    running.start()
    assert lock.hanging.wait(10), "the first renew (at 2 s) hangs"
    overdue: list[float] = []
    leader.watch_renewals(stop, overdue.append, interval=0.5)  # returns once it told
    assert len(overdue) == 1
    assert CONFIG["renew_deadline"] < overdue[0] <= CONFIG["renew_deadline"] + 0.5
    assert recorder.times("stopped") == [], "the elector itself is still stuck in the call"
    lock.released.set()
    stop.set()
    running.join(10)
