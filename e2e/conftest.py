"""The end-to-end suite runs on a whole local installation with process-backed nodes
(ftspark_dev.worlds.process_nodes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ftspark_dev.worlds.process_nodes import World, running_world


@pytest.fixture(scope="session")
def world() -> Iterator[World]:
    with running_world() as running:
        yield running


@pytest.fixture(autouse=True)
def no_job_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test of the world that fails midway leaves its jobs running; they would load every later test."""
    yield
    if "world" in request.fixturenames:
        world: World = request.getfixturevalue("world")
        for name in world.job_names():
            world.delete(name)
