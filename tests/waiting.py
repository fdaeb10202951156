"""Polling for tests that wait on a real controller."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], *, timeout: float, interval: float = 0.2, what: str = "") -> T:
    """Call probe until it returns something truthy; fail with what it last returned after timeout seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"not within {timeout:.0f} s: {what or probe} (last: {last!r})")
