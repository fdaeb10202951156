"""A savepoint taken from a running job, and a new job of another name started from it (a fork), gives
the same results as the original job continuing."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ftspark.protocol import SAVEPOINT_ANNOTATION
from ftspark_dev.subjects.windowed_counts import write_input
from tests.runtime.conftest import RuntimeJob


def _savepoint_result(job: RuntimeJob, savepoint_id: str, timeout: float = 60) -> dict[str, Any]:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        raw = job.pod_annotations().get(SAVEPOINT_ANNOTATION)
        if raw and json.loads(raw)["id"] == savepoint_id:
            result: dict[str, Any] = json.loads(raw)
            return result
        time.sleep(0.2)
    raise AssertionError(f"no savepoint {savepoint_id} within {timeout} s:\n{job.log()}")


@pytest.mark.slow
def test_fork_from_savepoint_continues_like_the_original(make_job: Any) -> None:
    original: RuntimeJob = make_job("orig")
    write_input(original.input, 5)
    original.start()
    original.wait_for_output(5, timeout=120)
    # The sink writes a batch's output before Spark commits it: wait for the commit (its pointer), so that
    # the latest committed batch the savepoint takes is the last one the output shows.
    last_output = max(original.output.batches())
    deadline = time.monotonic() + 60
    while (
        max((p.batch_id for p in original.stores().checkpoints.pointers(original.key)), default=-1)
        < last_output
    ):
        assert time.monotonic() < deadline, "the last batch was never committed"
        time.sleep(0.2)
    started = time.monotonic()
    original.request("savepoint", "sp-1")
    result = _savepoint_result(original, "sp-1")
    took = time.monotonic() - started
    assert "error" not in result, result
    saved_batch = result["batches"]["query-0"]
    assert saved_batch == max(original.output.batches())
    manifest = json.loads(original.read(f"{result['location']}/_manifest.json"))
    files = manifest["queries"]["query-0"]["files"]
    assert {"metadata", f"offsets/{saved_batch}", f"commits/{saved_batch}"} <= set(files)
    assert any(path.startswith("state/") for path in files)
    assert all(len(entry["sha256"]) == 64 for entry in files.values())

    write_input(original.input, 4, first_file=5)  # the original keeps going
    original.wait_for_output(9, timeout=120)
    original.request("stop", "2026-01-01T00:00:00+00:00")
    assert original.wait(60) == 0, original.log()

    fork: RuntimeJob = make_job("fork")
    fork.source = original.input
    fork.start(FTSPARK_INITIAL_SAVEPOINT=result["location"])
    saved_counts: dict[str, int] = {}
    for n, rows in original.output.batches().items():
        if n <= saved_batch:
            saved_counts.update(rows)
    fork.wait_for_output(9, timeout=120, before=saved_counts)  # its state starts from the savepoint's
    fork.request("stop", "2026-01-01T00:00:00+00:00")
    assert fork.wait(60) == 0, fork.log()

    continued = {n: rows for n, rows in original.output.batches().items() if n > saved_batch}
    print(
        f"\nsavepoint: batch {saved_batch}, {len(files)} files, "
        f"{sum(e['size'] for e in files.values())} bytes, taken in {took:.1f} s (incl. polling); "
        f"fork ran batches {sorted(fork.output.batches())}"
    )
    assert fork.output.batches() == continued
