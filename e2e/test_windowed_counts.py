"""One stateful streaming job through every fault this machine can inject, exactly-once checked at the end:
executor kill, driver kill, operator-leader kill, node kill, and stop with a checkpoint then resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark_dev.tour import FaultTour
from ftspark_dev.world import World


@pytest.mark.timeout(1800)  # five faults, each recovered by real Spark on 2 cores
def test_windowed_counts_survive_every_fault_exactly_once(world: World, tmp_path: Path) -> None:
    tour = FaultTour(world, tmp_path)
    tour.start()
    tour.kill_executor()
    tour.kill_driver()
    assert world.status(tour.name)["attempt"] >= 2
    tour.kill_leader()
    attempt = world.status(tour.name)["attempt"]
    tour.kill_node()
    assert world.status(tour.name)["attempt"] > attempt
    assert world.status(tour.name)["lastFailure"]["reason"] == "NodeLost"
    tour.stop_and_resume()
    figures = tour.finish()

    print("\nfault -> recovery (s):", {k: round(v, 1) for k, v in tour.recovery.items()})
    print("figures:", figures)
    assert (figures["lost"], figures["duplicated"]) == (0, 0)
    assert figures["records counted"] == figures["records in"]
    assert figures["most drivers alive at once"] == 1, "never two drivers of one job at once"
    assert figures["re-processed by re-run batches"] <= 2 * 20, "at most the in-flight batch of each kill"
    events = set(world.events(tour.name))
    assert {"Submitted", "Restarting", "Restarted", "Stopping", "Stopped", "Resumed"} <= events, events
