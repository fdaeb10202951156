"""Stop with a final checkpoint, then resume: nothing is processed twice, and a stop written while the driver
starts runs no batch; cancel (SIGKILL), then resume: at most the one uncommitted batch runs again."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from ftspark.adapters.s3.stores import split_uri
from ftspark.protocol import SAVEPOINT_ANNOTATION
from ftspark_dev.subjects.windowed_counts import expected_counts, write_input
from tests.runtime.conftest import RuntimeJob


@pytest.mark.slow
def test_stop_with_checkpoint_then_resume_processes_nothing_twice(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    # Spark's event logs for a History Server, on S3 as docs/operations.md says: the folder made first.
    bucket, _ = split_uri(job.storage)
    job.s3.client().put_object(Bucket=bucket, Key="spark-events/", Body=b"")
    job.extra_conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"s3a://{bucket}/spark-events/",
        "spark.eventLog.rolling.enabled": "true",
    }
    write_input(job.input, 4)
    job.start()
    job.wait_for_output(4, timeout=120)
    backlog_from = sum(job.output.runs().values())
    write_input(job.input, 10, first_file=4)
    # Not after a fixed delay (on a fast machine the backlog was done by then): once the backlog's first batch
    # ran. The query triggers at most every 200 ms, so its other 9 batches take 1.8 s or more on any machine,
    # far longer than the driver takes to see the request (it reads it every 0.5 s).
    job.wait_for_new_batch(backlog_from)
    job.request("stop", "2026-01-01T00:00:00+00:00")
    assert job.wait(60) == 0, job.log()
    message = job.termination()
    assert message["reason"] == "Stopped", message
    # Spark's own logging works: the AWS SDK bundle's SLF4J 1.x on extraClassPath must not shadow its binding.
    assert "Setting default log level" in job.log(100_000), job.log()
    stopped_at = message["lastCommitted"]["query-0"]
    assert stopped_at == max(job.output.batches()), (message, job.output.runs())
    pointers = job.stores().checkpoints.pointers(job.key)
    assert pointers[0].batch_id == stopped_at and pointers[0].attempt == 1
    # Spark's progress reports reach the pointers: a batch that read input took time and left state.
    reported = [p.figures for p in pointers if p.figures is not None and p.figures.input_rows > 0]
    assert reported, pointers
    assert all(f.duration_ms > 0 and f.state_rows > 0 and f.state_bytes > 0 for f in reported), reported
    # ... and the source's end offset as its offsets log has it: the file source's, compact JSON.
    offsets = [offset for p in pointers for offset in p.source_end_offsets.values()]
    assert offsets and all(re.fullmatch(r'\{"logOffset":\d+\}', offset) for offset in offsets), offsets

    assert 4 <= stopped_at < 13, "the stop should have come in the middle of the backlog (batches 4 to 13)"
    runs_before = sum(job.output.runs().values())
    started = time.monotonic()
    job.start()
    first_batch = job.wait_for_new_batch(runs_before)
    write_input(job.input, 2, first_file=14)
    job.wait_for_output(16, timeout=120)
    job.request("stop", "2026-01-01T00:01:00+00:00")
    assert job.wait(60) == 0, job.log()

    assert job.output.counts() == expected_counts(16)
    reprocessed = job.output.reprocessed_records()
    print(
        f"\nstop -> resume: stopped at batch {stopped_at}; restart to first committed batch "
        f"{first_batch:.1f} s (process start {time.monotonic() - started:.1f} s ago); "
        f"records processed twice: {reprocessed}"
    )
    assert reprocessed == 0, job.output.runs()
    ids = [p.checkpoint_id for p in job.stores().checkpoints.pointers(job.key)]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    assert job.stores().checkpoints.pointers(job.key)[0].attempt == 2
    listed = job.s3.client().list_objects_v2(Bucket=bucket, Prefix="spark-events/eventlog_v2_")
    logged = {item["Key"].split("/")[1] for item in listed.get("Contents", [])}
    assert len(logged) == 2, f"an event log per run, as a History Server reads them: {logged}"

    _a_stop_written_at_the_drivers_start_runs_no_batch(job)


def _a_stop_written_at_the_drivers_start_runs_no_batch(job: RuntimeJob) -> None:
    """A stop written while the driver still starts (a user stops a job as it comes back): carried out before
    the script starts its query, so no batch runs after it, and its savepoint is refused, not empty."""
    write_input(job.input, 2, first_file=16)  # what the query would run at once if it started
    runs_before = job.output.runs()
    started = time.monotonic()
    job.start()
    job.request("stop-savepoint", "sp-early")
    assert job.wait(60) == 0, job.log()
    message = job.termination()
    print(f"a stop written at the driver's start: ended {time.monotonic() - started:.1f} s after it")
    assert message["reason"] == "Stopped" and "before its queries started" in message["message"], message
    assert job.output.runs() == runs_before, "a batch ran after the stop"
    assert job.stores().checkpoints.pointers(job.key)[0].attempt == 2
    answer = json.loads(job.pod_annotations()[SAVEPOINT_ANNOTATION])
    assert answer["id"] == "sp-early" and "nothing to save" in answer["error"], answer


@pytest.mark.slow
def test_cancel_then_resume_reruns_at_most_the_uncommitted_batch(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    write_input(job.input, 3)
    job.start()
    job.wait_for_output(3, timeout=120)
    backlog_from = sum(job.output.runs().values())
    write_input(job.input, 10, first_file=3)
    # Killed once the backlog's first batch ran (not after a fixed delay, by which a fast machine was done):
    # its other 9 batches take 1.8 s or more (a trigger every 200 ms), the kill a moment.
    job.wait_for_new_batch(backlog_from)
    job.kill()  # cancel: no final checkpoint
    killed_at = max(job.output.runs())
    assert 3 <= killed_at < 12, "killed in the middle of the backlog (batches 3 to 12)"

    runs_before = sum(job.output.runs().values())
    job.start()
    first_batch = job.wait_for_new_batch(runs_before)
    job.wait_for_output(13, timeout=120)
    job.request("stop", "2026-01-01T00:00:00+00:00")
    assert job.wait(60) == 0, job.log()

    assert job.output.counts() == expected_counts(13)
    again = {batch: n for batch, n in job.output.runs().items() if n > 1}
    reprocessed = job.output.reprocessed_records()
    print(
        f"\ncancel -> resume: killed during batch {killed_at}; restart (incl. the lease expiry) to first "
        f"committed batch {first_batch:.1f} s; batches run twice {sorted(again)}, records re-processed "
        f"{reprocessed}"
    )
    assert set(again) <= {killed_at} and all(n == 2 for n in again.values()), job.output.runs()
