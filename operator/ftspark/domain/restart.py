"""Restart strategies (Flink's fixed-delay, exponential-delay, failure-rate, none) as pure functions.

The state that must survive a leader change lives in RestartState (kept in the job's status); time is
passed in, randomness is passed in, so tests drive everything with a fake clock.

A new strategy is a member of models.RestartStrategyType, its settings model on models.RestartStrategy, and a
case in on_failure (mypy refuses the match without it); tests/unit/test_restart.py drives each strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, assert_never

from ftspark.domain.models import RestartState, RestartStrategy


@dataclass(frozen=True)
class RestartVerdict:
    restart: bool
    delay_seconds: float
    state: RestartState
    reason: str
    # Not restarted because no restart fixes the cause: what to do is the failure's own fix.
    fix_the_cause: bool = False


def on_failure(
    strategy: RestartStrategy,
    state: RestartState,
    now: datetime,
    attempt_started_at: datetime | None,
    uniform: Callable[[], float],
) -> RestartVerdict:
    """Decide after a failed attempt; uniform() returns a number in [0, 1) for jitter."""
    failures = [t for t in state.recent_failures if t <= now] + [now]
    match strategy.type:
        case "none":
            return RestartVerdict(
                False, 0.0, state.model_copy(update={"recent_failures": failures[-1:]}), "no restarts"
            )
        case "fixed-delay":
            settings = strategy.fixed_delay
            if state.count >= settings.attempts:
                return _give_up(state, f"{settings.attempts} restart(s) used")
            return _restart(state, settings.delay_seconds, failures[-1:], "fixed delay")
        case "failure-rate":
            rate = strategy.failure_rate
            window_start = now - timedelta(seconds=rate.interval_seconds)
            in_window = [t for t in failures if t > window_start]
            if len(in_window) > rate.max_failures_per_interval:
                return _give_up(
                    state.model_copy(update={"recent_failures": in_window}),
                    f"{len(in_window)} failures within {rate.interval_seconds:g} s "
                    f"(at most {rate.max_failures_per_interval} allowed)",
                )
            return _restart(state, rate.delay_seconds, in_window, "failure rate within bounds")
        case "exponential-delay":
            return _exponential(strategy, state, now, attempt_started_at, uniform)
        case _:
            assert_never(strategy.type)


# What no restart fixes: the spec, or what it names, has to change.
CONFIGURATION_CAUSES = frozenset(
    {
        "ApplicationFile",
        "MainFileMissing",
        "BadConfig",
        "RuntimeMismatch",
        "ImageIncomplete",
        "SparkNotStarted",
        "Savepoint",
        "CreateContainerConfigError",
        "InvalidImageName",
    }
)


# Causes outside the job: its node, the API server, the cluster's capacity or registry. A restart elsewhere
# or later usually works, and the job's own budget of failures is not the place to pay for them.
INFRASTRUCTURE_CAUSES = frozenset(
    {
        "NodeLost",
        "DriverLost",
        "Evicted",
        "LeaseLost",
        "DriverUnschedulable",
        "DriverVolumeNotBound",
        "ImagePullBackOff",
        "ErrImagePull",
        "ExecutorsNotStarted",
    }
)
FailureCategory = Literal["application", "infrastructure", "configuration"]


def category(reason: str) -> FailureCategory:
    """Whose a failure's cause is, by its reason."""
    if reason in CONFIGURATION_CAUSES:
        return "configuration"
    return "infrastructure" if reason in INFRASTRUCTURE_CAUSES else "application"


def after_failure(
    strategy: RestartStrategy,
    state: RestartState,
    reason: str,
    now: datetime,
    attempt_started_at: datetime | None,
    uniform: Callable[[], float],
) -> RestartVerdict:
    """The verdict on a failed attempt by its cause's category: the failures in a row counted per category
    and in all; a configuration cause or the consecutive cap may end the job whatever the strategy says; an
    infrastructure cause is restarted outside the strategy's count, up to its own limit; the rest is the
    strategy's (on_failure)."""
    kind = category(reason)
    counted = state.model_copy(
        update={
            "configuration_failures": state.configuration_failures + 1 if kind == "configuration" else 0,
            "infrastructure_failures": state.infrastructure_failures + 1 if kind == "infrastructure" else 0,
            "consecutive_failures": state.consecutive_failures + 1,
        }
    )
    limit = strategy.configuration_failures
    if kind == "configuration" and limit and counted.configuration_failures >= limit:
        why = (
            f"{counted.configuration_failures} attempt(s) in a row failed for a cause no restart fixes "
            f"(restartStrategy.configurationFailures: {limit}); fix it, then change the spec"
        )
        return RestartVerdict(False, 0.0, counted, why, fix_the_cause=True)
    cap, failed = strategy.max_consecutive_failures, counted.consecutive_failures
    if cap and failed >= cap:
        return _give_up(
            counted, f"{failed} attempt(s) in a row failed (restartStrategy.maxConsecutiveFailures)"
        )
    limit = strategy.infrastructure_failures
    if kind != "infrastructure" or not limit or strategy.type == "none":
        return on_failure(strategy, counted, now, attempt_started_at, uniform)
    if counted.infrastructure_failures >= limit:
        why = (
            f"{counted.infrastructure_failures} attempt(s) in a row failed for a cause outside the job "
            f"(restartStrategy.infrastructureFailures: {limit})"
        )
        return _give_up(counted, why)
    return RestartVerdict(
        True, _first_delay(strategy), counted, "a cause outside the job, not counted by the strategy"
    )


def _first_delay(strategy: RestartStrategy) -> float:
    match strategy.type:
        case "fixed-delay":
            return strategy.fixed_delay.delay_seconds
        case "failure-rate":
            return strategy.failure_rate.delay_seconds
        case "exponential-delay":
            return strategy.exponential_delay.initial_backoff_seconds
        case "none":
            return 0.0
        case _:
            assert_never(strategy.type)


def _exponential(
    strategy: RestartStrategy,
    state: RestartState,
    now: datetime,
    attempt_started_at: datetime | None,
    uniform: Callable[[], float],
) -> RestartVerdict:
    settings = strategy.exponential_delay
    stable_for = (now - attempt_started_at).total_seconds() if attempt_started_at else 0.0
    if state.backoff_seconds is None or stable_for >= settings.reset_backoff_threshold_seconds:
        backoff, reason = settings.initial_backoff_seconds, "initial backoff"
        if state.backoff_seconds is not None:
            reason = f"backoff reset after {stable_for:.0f} s of stable running"
    else:
        backoff = min(state.backoff_seconds * settings.backoff_multiplier, settings.max_backoff_seconds)
        reason = "backoff increased"
    if settings.attempts is not None and state.count >= settings.attempts:
        return _give_up(state, f"{settings.attempts} restart(s) used")
    jitter = backoff * settings.jitter_factor * (2.0 * uniform() - 1.0)
    delay = max(0.0, min(backoff + jitter, settings.max_backoff_seconds))
    verdict = _restart(state, delay, [now], reason)
    return RestartVerdict(True, delay, verdict.state.model_copy(update={"backoff_seconds": backoff}), reason)


def _restart(state: RestartState, delay: float, failures: list[datetime], reason: str) -> RestartVerdict:
    return RestartVerdict(
        True, delay, state.model_copy(update={"count": state.count + 1, "recent_failures": failures}), reason
    )


def _give_up(state: RestartState, reason: str) -> RestartVerdict:
    return RestartVerdict(False, 0.0, state, reason)
