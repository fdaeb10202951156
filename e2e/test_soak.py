"""The short seeded soak (`make soak` runs the long one, tools/ftspark_dev/scenarios/soak.py): windowed
counts and session windows through each kind of fault the process-backed installation injects that CI proves
nowhere else, once each in a seeded order; exactly-once against the batch computation, one driver per job and
one acting leader at any moment, from the probes and from the API server's audit log.

The kinds the real-node fault tour proves on real containers (tests/realnodes/test_installation.py: executor,
driver, operator-leader and node kills, stop and resume, a standby's promotion) and e2e/test_recovery.py
(a driver kill without a standby) are left to them, and so are spec upgrades (e2e/test_lifecycle.py, each
upgrade mode), a plain cancel and resume (the torn-checkpoint kind here cancels and resumes too, and
tests/runtime/test_stop_resume.py bounds what it re-runs) and a driver JVM stopped (the runtime's watchdog
ends it as hung: tests/runtime/test_failures.py; the operator restarts any ending); `make soak` runs every
kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark_dev.scenarios.soak import FAULTS, Soak, writers_in
from ftspark_dev.worlds.process_nodes import World

SEED = 14
PROVEN_ELSEWHERE = {
    *("executor kill", "driver kill", "stop, resume", "leader kill", "node kill"),
    *("spec upgrade", "cancel, resume", "driver JVM stopped"),
}
KINDS = sorted(set(FAULTS) - PROVEN_ELSEWHERE)


@pytest.mark.timeout(3000)  # 7 faults recovered by real Spark on 2 cores, two jobs at once
def test_two_jobs_come_through_a_seeded_fault_schedule_exactly_once(world: World, tmp_path: Path) -> None:
    soak = Soak(world, tmp_path, SEED)
    figures = soak.run(len(KINDS), KINDS)
    print(f"\n{soak.table(figures)}")

    assert sorted(soak.schedule) == KINDS and set(FAULTS) >= PROVEN_ELSEWHERE
    for name, figure in figures.items():
        assert (figure["lost"], figure["duplicated"], figure["wrong"]) == (0, 0, 0), (name, figure)
        assert figure["records counted"] == figure["records in"] > 0, (name, figure)
        assert figure["most drivers alive at once"] == 1, f"never two drivers of {name} at once"
        assert figure["most operator leaders acting at once"] == 1, "never two acting leaders"
    promoted = {name: figure["attempts that were a promoted standby"] for name, figure in figures.items()}
    assert promoted["counts"] == 0, f"only the job with a standby promotes: {promoted}"
    events = {reason for tour in soak.tours for reason in tour.events()}
    said = {"Cancelled", "Resumed", "CheckpointRolledBack", "JobGraphRecovered"}
    assert said <= events, f"the faults' Events: {said - events} missing"
    assert "StateNotFound" not in events, "no job ever started without its state"
    windows = soak.busiest_windows()  # the audit log, read once
    writers = writers_in(windows)
    assert writers["operator"] == 1, f"the API server saw two operator replicas write at once: {windows}"
    assert all(writers[tour.name] == 1 for tour in soak.tours), (
        f"two drivers of one job wrote at once: {windows}"
    )
    for tour in soak.tours:
        world.delete(tour.name)
