"""A hung driver: its JVM stopped (SIGSTOP) while input keeps arriving. Kubernetes sees a running pod; the
driver's own watchdog (a Python thread, which runs on) ends it after spec.liveness.progressTimeoutSeconds, the
operator restarts it, and every record is still counted exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark.protocol import NO_PROGRESS
from ftspark_dev.tour import ProcessFaultTour
from ftspark_dev.windowed_counts import RECORDS_PER_FILE
from ftspark_dev.world import World

PROGRESS_TIMEOUT = 30  # above the first batch's wait for its executor on 2 busy cores


@pytest.mark.timeout(1200)
def test_a_driver_whose_jvm_hangs_is_restarted_and_nothing_is_lost(world: World, tmp_path: Path) -> None:
    liveness = {"liveness": {"progressTimeoutSeconds": PROGRESS_TIMEOUT}}
    tour = ProcessFaultTour(world, tmp_path, name="hung-driver", spec=liveness)
    tour.start()
    tour.hang_driver_jvm()
    figures = tour.finish()

    print(f"\nhung driver JVM:\n{tour.report(figures)}")
    assert tour.watch is not None
    print("phases seen:", tour.watch.phases_seen, "degraded:", tour.watch.degraded_seen)
    assert tour.watch.degraded_seen == [NO_PROGRESS], "no other failure, and no false alarm before"
    assert figures["attempts"] == 2, "one new attempt"
    failure = world.status(tour.name)["lastFailure"]
    assert failure["exitCode"] == 4
    assert f"progress timeout is {PROGRESS_TIMEOUT} s" in failure["message"], failure
    assert "Restarting" in tour.watch.phases_seen
    assert (figures["lost"], figures["duplicated"]) == (0, 0)
    assert figures["records counted"] == figures["records in"]
    assert figures["most drivers alive at once"] == 1, "never two drivers of one job at once"
    assert figures["re-processed by re-run batches"] <= RECORDS_PER_FILE, "at most the one open batch"
    recovered = tour.recovery["driver JVM stopped -> next batch"]
    assert recovered >= PROGRESS_TIMEOUT, "not restarted before the timeout"
    world.delete(tour.name)
