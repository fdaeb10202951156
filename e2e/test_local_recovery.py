"""Task-local recovery through the whole installation, with RocksDB and its changelog checkpointing
(spec.stateStore): after a driver kill the new attempt's executors run on the node the state is on and read
it from that node's disk, not from S3; after an executor kill too; and the totals stay right (nothing lost,
nothing counted twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark_dev.worlds.local_recovery import StateJob, local_recovery_jar
from ftspark_dev.worlds.process_nodes import World


@pytest.mark.timeout(1200)
def test_restarted_executors_read_their_state_from_their_node(world: World, tmp_path: Path) -> None:
    job = StateJob(
        world,
        tmp_path,
        "local-state",
        keys=5000,
        payload=100,
        local_recovery=True,
        jar=local_recovery_jar(),
        totals=True,
        changelog=True,
    )
    job.load(ids=40_000, files=4)
    # The driver kill first: attempt 1's executor has not moved, so all its state is on one node. (An executor
    # Spark replaces within an attempt may land on another node; its state then spans two nodes, and the
    # next attempt's executor, on one of them, reads the other's files from S3: docs/local-recovery.md.)
    restarts = [job.restart_after("driver"), job.restart_after("executor")]
    for restart in restarts:
        print(f"\n{restart}")
    written, expected = job.written_and_expected()
    assert written == expected

    placement = world.status("local-state")["placement"]
    assert placement["nodes"], placement
    driver_restart = restarts[0]
    assert driver_restart.nodes_after == driver_restart.nodes_before, driver_restart
    assert driver_restart.state_from_local > 0
    assert driver_restart.state_from_s3 == 0, driver_restart
    executor_restart = restarts[1]
    if executor_restart.nodes_after == executor_restart.nodes_before:  # Spark placed it: no affinity there
        assert executor_restart.state_from_s3 == 0, executor_restart
        assert executor_restart.state_from_local > 0, executor_restart
    world.delete("local-state")
