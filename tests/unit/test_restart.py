"""Restart strategies with a fake clock and fixed randomness."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ftspark.domain.models import RestartState, RestartStrategy
from ftspark.domain.restart import after_failure, category, on_failure

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def middle() -> float:
    return 0.5  # no jitter: 2 * 0.5 - 1 == 0


def strategy(**fields: object) -> RestartStrategy:
    return RestartStrategy.model_validate(fields)


def test_none_never_restarts() -> None:
    verdict = on_failure(strategy(type="none"), RestartState(), T0, None, middle)
    assert not verdict.restart


def test_fixed_delay_allows_the_configured_attempts_then_gives_up() -> None:
    fixed = strategy(type="fixed-delay", fixedDelay={"attempts": 2, "delaySeconds": 7})
    state = RestartState()
    delays = []
    for minute in range(2):
        verdict = on_failure(fixed, state, T0 + timedelta(minutes=minute), None, middle)
        assert verdict.restart
        delays.append(verdict.delay_seconds)
        state = verdict.state
    assert delays == [7, 7]
    final = on_failure(fixed, state, T0 + timedelta(minutes=3), None, middle)
    assert not final.restart
    assert "2 restart(s) used" in final.reason


def test_exponential_delay_grows_caps_and_resets_after_stable_running() -> None:
    exponential = strategy(
        exponentialDelay={
            "initialBackoffSeconds": 1,
            "maxBackoffSeconds": 10,
            "backoffMultiplier": 3,
            "jitterFactor": 0,
            "resetBackoffThresholdSeconds": 600,
        }
    )
    state, now, delays = RestartState(), T0, []
    for _ in range(5):
        verdict = on_failure(exponential, state, now, now - timedelta(seconds=5), middle)
        delays.append(verdict.delay_seconds)
        state, now = verdict.state, now + timedelta(seconds=30)
    assert delays == [1, 3, 9, 10, 10]
    stable = on_failure(exponential, state, now, now - timedelta(seconds=601), middle)
    assert stable.delay_seconds == 1
    assert "reset" in stable.reason


@pytest.mark.parametrize(("draw", "expected"), [(0.0, 9.0), (0.999999, 11.0)])
def test_exponential_jitter_stays_within_its_factor(draw: float, expected: float) -> None:
    exponential = strategy(
        exponentialDelay={"initialBackoffSeconds": 10, "maxBackoffSeconds": 100, "jitterFactor": 0.1}
    )
    verdict = on_failure(exponential, RestartState(), T0, None, lambda: draw)
    assert verdict.delay_seconds == pytest.approx(expected, abs=1e-4)
    assert verdict.state.backoff_seconds == 10


def test_exponential_attempt_limit() -> None:
    exponential = strategy(exponentialDelay={"attempts": 1})
    first = on_failure(exponential, RestartState(), T0, None, middle)
    assert first.restart
    assert not on_failure(exponential, first.state, T0 + timedelta(seconds=9), None, middle).restart


def test_failure_rate_counts_only_failures_inside_the_interval() -> None:
    rate = strategy(type="failure-rate", failureRate={"maxFailuresPerInterval": 2, "intervalSeconds": 60})
    state = RestartState()
    for second in (0, 10):
        verdict = on_failure(rate, state, T0 + timedelta(seconds=second), None, middle)
        assert verdict.restart
        state = verdict.state
    third = on_failure(rate, state, T0 + timedelta(seconds=20), None, middle)
    assert not third.restart
    assert "3 failures within 60 s" in third.reason
    later = on_failure(rate, state, T0 + timedelta(seconds=65), None, middle)
    assert later.restart, "the failure at 0 s left the window"


def test_failures_outside_the_job_are_restarted_without_spending_the_strategys_attempts() -> None:
    """A lost node, an eviction, a lost Lease: restarted after the strategy's first delay, its attempts
    untouched, up to restartStrategy.infrastructureFailures in a row; an application failure in between
    starts that count again and spends an attempt."""
    fixed = strategy(
        type="fixed-delay", fixedDelay={"attempts": 1, "delaySeconds": 7}, infrastructureFailures=3
    )
    state = RestartState()
    for reason in ("NodeLost", "Evicted"):
        verdict = after_failure(fixed, state, reason, T0, None, middle)
        assert (verdict.restart, verdict.delay_seconds, verdict.state.count) == (True, 7, 0), reason
        state = verdict.state
    assert state.infrastructure_failures == 2
    third = after_failure(fixed, state, "LeaseLost", T0, None, middle)
    assert not third.restart and "restartStrategy.infrastructureFailures: 3" in third.reason
    application = after_failure(fixed, state, "ScriptFailed", T0, None, middle)
    assert (application.restart, application.state.count, application.state.infrastructure_failures) == (
        True,
        1,
        0,
    )
    counted_alike = strategy(type="fixed-delay", fixedDelay={"attempts": 0}, infrastructureFailures=0)
    assert not after_failure(counted_alike, RestartState(), "NodeLost", T0, None, middle).restart
    assert not after_failure(strategy(type="none"), RestartState(), "NodeLost", T0, None, middle).restart
    assert [category(r) for r in ("NodeLost", "MainFileMissing", "ScriptFailed", "OOMKilled")] == [
        "infrastructure",
        "configuration",
        "application",
        "application",
    ], "a container over its memory limit is the job's sizing"


def test_the_consecutive_cap_ends_the_job_whatever_the_strategy_allows() -> None:
    endless = strategy(maxConsecutiveFailures=3)  # exponential-delay: no attempt limit
    state = RestartState()
    for reason in ("ScriptFailed", "NodeLost"):
        verdict = after_failure(endless, state, reason, T0, None, middle)
        assert verdict.restart
        state = verdict.state
    capped = after_failure(endless, state, "ScriptFailed", T0, None, middle)
    assert (capped.restart, capped.state.consecutive_failures) == (False, 3)
    assert "restartStrategy.maxConsecutiveFailures" in capped.reason and not capped.fix_the_cause
