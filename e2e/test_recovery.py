"""Driver recovery (ftspark_dev.scenarios.recovery): the job's driver SIGKILLed, without and with a warm
standby (two jobs at once), each step of the way back timed. make bench runs the same with more kills, one row
at a time, and plain Spark beside it, a figure to compare with that proves nothing of ftspark, so CI leaves it
out."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark_dev.scenarios.recovery import FTSPARK, STANDBYS, STEPS, Timeline, side_by_side
from ftspark_dev.worlds.process_nodes import World


def _in_order(timeline: Timeline) -> bool:
    return all(a <= b for a, b in zip(timeline.seconds, timeline.seconds[1:], strict=False))


@pytest.mark.timeout(1500)
def test_a_killed_driver_comes_back_through_every_step_and_ftspark_fences_and_goes_or_promotes_its_standby(
    world: World, tmp_path: Path
) -> None:
    # The standby that keeps its executor warm: the cold one is the fault tour's (tests/realnodes).
    compared = side_by_side(
        world, tmp_path, kills=1, standbys=(True,), plain=False, at_once=True, report=print
    )
    print(f"\n{compared.table()}")

    for _, timelines in compared.rows():
        for timeline in timelines:
            assert len(timeline.seconds) == len(STEPS)
            assert _in_order(timeline), timeline
    ftspark, standby = compared.ftspark_runs[FTSPARK], compared.ftspark_runs[STANDBYS[True]]
    for run in (ftspark, standby):
        assert (run.figures["lost"], run.figures["duplicated"], run.figures["wrong"]) == (0, 0, 0), (
            run.figures
        )
        # The operator released each killed driver's Lease: no attempt waited for it to expire (15 s here).
        assert all(line.endswith("(free)") for line in run.leases), run.leases
    assert (ftspark.promotions, standby.promotions) == (0, 1), "the standby took over"
    assert standby.warmed == 1, "on the executor it had kept up and warmed"
    # Each new driver watched its executors for a lost node (a standby from its start, so before its
    # promotion): the runtime's own watch on the API server, answered.
    assert (ftspark.watching, standby.watching) == (1, 1)

    # The operator timed each recovery itself (status.lastFailure.recoveryPhases), every step there. Counted
    # from the container's end (its kubelet's word, a moment after the kill), they agree with the outside
    # watch: the same container start, and the batch committed after the sink saw it run (never before; its
    # commit, state and pointer follow, seconds later on two busy cores).
    print(f"\n{compared.phase_table()}")
    for run, absent in ((ftspark, set()), (standby, {"pod_running", "runtime_started"})):
        ((phases, timeline),) = zip(run.phases, run.timelines, strict=True)
        steps = phases.model_dump(exclude={"standby"})
        assert {name for name, value in steps.items() if value is None} == absent, phases
        assert phases.standby == (run is standby)
        if phases.pod_running is not None:
            assert abs(phases.pod_running - timeline.seconds[1]) < 2.0, (phases, timeline)
        assert timeline.seconds[-1] - 1.5 < phases.committed < timeline.seconds[-1] + 15, (phases, timeline)
