"""Polling for tests that wait on a real controller."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.2,
    what: str | Callable[[], str] = "",
) -> T:
    """Call probe until it returns something truthy; fail with what it last returned after timeout seconds.

    what describes the wait; a callable is called only on failure (e.g. to attach logs)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    description = what() if callable(what) else what
    raise AssertionError(f"not within {timeout:.0f} s: {description or probe} (last: {last!r})")
