"""The end-to-end suite runs on a whole local installation with process-backed nodes (ftspark_dev.world)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ftspark_dev.world import World, running_world


@pytest.fixture(scope="session")
def world() -> Iterator[World]:
    with running_world() as running:
        yield running
