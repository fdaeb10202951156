"""A damaged latest checkpoint (state or offset file) is rolled back to the newest good batch, the driver
says so in its log and termination message, and the output stays exactly once."""

from __future__ import annotations

from typing import Any

import pytest

from ftspark.protocol import NO_RESTORABLE_CHECKPOINT, Exit
from ftspark_dev.subjects.windowed_counts import expected_counts, write_input
from tests.runtime.conftest import RuntimeJob


@pytest.mark.slow
@pytest.mark.parametrize("damaged", ["state", "offsets"])
def test_damaged_latest_checkpoint_rolls_back_to_the_previous_batch(make_job: Any, damaged: str) -> None:
    job: RuntimeJob = make_job()
    write_input(job.input, 5)
    job.start()
    job.wait_for_output(5, timeout=120)
    job.request("stop", "2026-01-01T00:00:00+00:00")
    assert job.wait(60) == 0, job.log()
    latest = job.termination()["lastCommitted"]["query-0"]
    query = f"{job.checkpoint_root.replace('s3://', 's3a://')}/query-0"
    target = f"{query}/state/0/0/{latest + 1}.delta" if damaged == "state" else f"{query}/offsets/{latest}"
    job.read(target)  # it exists
    job.write(target, b"\x00garbage: a torn write\xff")

    write_input(job.input, 2, first_file=5)
    job.start()
    job.wait_for_output(7, timeout=120)
    job.request("stop", "2026-01-01T00:01:00+00:00")
    assert job.wait(60) == 0, job.log()

    message = job.termination()
    print(f"\nrollback ({damaged}): {message['rollbacks']}; batch runs {dict(job.output.runs())}")
    assert len(message["rollbacks"]) == 1
    assert f"rolled back from batch {latest} to {latest - 1}" in message["rollbacks"][0]
    assert target.rsplit("/", 2)[-2] in message["rollbacks"][0]
    assert "checkpoint rollback" in job.log(400)
    assert job.output.counts() == expected_counts(7)
    if damaged == "state":  # offsets/<latest> was readable: the batch re-ran with exactly its offsets
        assert job.output.runs()[latest] == 2


@pytest.mark.slow
def test_no_restorable_batch_ends_the_driver_asking_for_a_manual_restore(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    write_input(job.input, 3)
    job.start()
    job.wait_for_output(3, timeout=120)
    job.request("stop", "2026-01-01T00:00:00+00:00")
    assert job.wait(60) == 0, job.log()
    query = f"{job.checkpoint_root.replace('s3://', 's3a://')}/query-0"
    first_state = f"{query}/state/0/0/1.delta"  # every batch's state chain starts here
    job.read(first_state)
    job.write(first_state, b"")  # lost its content

    job.start()
    assert job.wait(60) == Exit.BAD_INPUT, job.log()
    message = job.termination()
    assert message["reason"] == NO_RESTORABLE_CHECKPOINT, message
    assert "manual restore" in message["message"]
