"""One stateful streaming job through the faults only this installation can inject, exactly-once checked at
the end: an operator leader cut off from the API server, an API server restart, an S3 outage, and a cancel
with a damaged latest checkpoint then resume. The faults real containers suffer the same way (executor,
driver, leader and node kills, stop and resume) run on real nodes (tests/realnodes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark_dev.tour import ProcessFaultTour
from ftspark_dev.windowed_counts import RECORDS_PER_FILE
from ftspark_dev.world import World


@pytest.mark.timeout(2400)  # each fault recovered by real Spark on 2 cores
def test_windowed_counts_survive_every_fault_exactly_once(world: World, tmp_path: Path) -> None:
    tour = ProcessFaultTour(world, tmp_path)
    tour.start()
    tour.partition_leader()
    tour.restart_api_server()
    tour.s3_outage()
    tour.cancel_damage_and_resume()
    figures = tour.finish()

    print(f"\nprocess-backed nodes:\n{tour.report(figures)}")
    print("phases seen:", tour.watch.phases_seen if tour.watch else None)
    assert (figures["lost"], figures["duplicated"]) == (0, 0)
    assert figures["records counted"] == figures["records in"]
    assert figures["most drivers alive at once"] == 1, "never two drivers of one job at once"
    assert figures["most operator leaders acting at once"] == 1, "never two acting leaders"
    faults = sum(step.endswith("-> next batch") for step in tour.recovery)
    assert figures["re-processed by re-run batches"] <= faults * RECORDS_PER_FILE, "at most one batch a fault"
    rollback = world.status(tour.name)["lastRollback"]["message"]
    assert f"rolled back from batch {tour.damaged.rsplit('/', 1)[-1]} to" in rollback, rollback
    events = set(world.events(tour.name))
    assert {"Submitted", "Cancelled", "Resumed", "CheckpointRolledBack"} <= events, events
