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
from typing import assert_never

from ftspark.domain.models import RestartState, RestartStrategy


@dataclass(frozen=True)
class RestartVerdict:
    restart: bool
    delay_seconds: float
    state: RestartState
    reason: str


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


def configuration_verdict(
    strategy: RestartStrategy, state: RestartState, reason: str
) -> tuple[RestartState, str | None]:
    """Counts the attempts in a row that failed for a configuration cause; with the limit reached, why the
    job is not restarted (None: the strategy decides)."""
    count = state.configuration_failures + 1 if reason in CONFIGURATION_CAUSES else 0
    counted = state.model_copy(update={"configuration_failures": count})
    limit = strategy.configuration_failures
    if not limit or count < limit:
        return counted, None
    return counted, (
        f"{count} attempt(s) in a row failed for a cause no restart fixes "
        f"(restartStrategy.configurationFailures: {limit}); fix it, then change the spec"
    )


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
