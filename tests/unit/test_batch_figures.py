"""A batch's figures: from Spark's progress report to the pointer, the status and the job's metrics."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey
from ftspark.domain.models import BatchFigures, CheckpointRef, JobStatus
from ftspark.metrics import JobMetrics
from ftspark.runtime.objects import ObjectStore
from ftspark.runtime.reporting import PointerReporter, SparkProgress, StartMarks, batch_figures
from ftspark.testing.stores import memory_stores


def progress(**changes: object) -> SparkProgress:
    """Spark's progress report, as the JSON its JVM writes (StreamingQueryProgress.json)."""
    fields: dict[str, object] = {
        "id": "0b1f6a52-4c41-4f42-9a51-4bb1a7f2c2a1",
        "batchId": 7,
        "timestamp": "2026-11-30T14:02:33.924Z",
        "durationMs": {"triggerExecution": 1500, "addBatch": 1200},
        "numInputRows": 300,
        "inputRowsPerSecond": 120.5,
        "processedRowsPerSecond": 200.0,
        "stateOperators": [
            {"operatorName": "stateStoreSave", "numRowsTotal": 40, "memoryUsedBytes": 4096},
            {"operatorName": "stateStoreSave", "numRowsTotal": 2, "memoryUsedBytes": 512},
        ],
        "sources": [
            {"description": "KafkaV2[Subscribe[events]]", "endOffset": {"events": {"0": 1200, "1": 980}}},
            {"description": "FileStreamSource[s3a://in/é]", "endOffset": {"logOffset": 7}},
        ],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
    }
    return SparkProgress.model_validate_json(json.dumps(fields | changes))


def test_the_figures_of_a_progress_report() -> None:
    assert batch_figures(progress()) == BatchFigures(
        duration_ms=1500,
        input_rows=300,
        input_rows_per_second=120.5,
        processed_rows_per_second=200.0,
        state_rows=42,
        state_bytes=4608,
    )


def test_spark_s_left_out_rates_are_zero_and_unreadable_figures_are_left_out() -> None:
    # Spark's JSON leaves out a NaN rate (the first batch has nothing to divide by).
    first = progress()
    first_json = json.loads(first.model_dump_json(by_alias=True))
    del first_json["inputRowsPerSecond"], first_json["processedRowsPerSecond"]
    figures = batch_figures(SparkProgress.model_validate(first_json))
    assert figures is not None
    assert (figures.input_rows_per_second, figures.processed_rows_per_second) == (0, 0)
    assert batch_figures(progress(numInputRows=-1)) is None
    assert batch_figures(progress(stateOperators=[{"numRowsTotal": 2**60, "memoryUsedBytes": 0}])) is None


def test_each_source_s_end_offset_is_kept_as_its_offsets_log_has_it() -> None:
    # Compact JSON, as Spark writes an offset: not Python's rendering of the parsed value.
    assert progress().source_end_offsets() == {
        "0:KafkaV2[Subscribe[events]]": '{"events":{"0":1200,"1":980}}',
        "1:FileStreamSource[s3a://in/é]": '{"logOffset":7}',
    }


def test_the_newest_batch_s_figures_are_the_job_s_metrics() -> None:
    figures = BatchFigures(
        duration_ms=1500, input_rows_per_second=10, processed_rows_per_second=20, state_rows=3
    )
    checkpoint = CheckpointRef(
        id=4, batch_id=3, time=datetime.now(UTC), location="s3a://b/c", figures=figures
    )
    metrics = JobMetrics()
    metrics.record(JobKey(namespace="ns", name="counts"), JobStatus(latest_checkpoint=checkpoint))
    metrics.record(JobKey(namespace="ns", name="new"), JobStatus())
    samples = {
        (family.name, sample.labels.get("job")): sample.value
        for family in metrics.collect()
        for sample in family.samples
    }
    assert samples[("ftspark_job_batch_duration_seconds", "counts")] == 1.5
    assert samples[("ftspark_job_processed_rows_per_second", "counts")] == 20
    assert samples[("ftspark_job_state_rows", "counts")] == 3
    assert ("ftspark_job_state_rows", "new") not in samples, "no batch yet: no figure"


class _Committed(ObjectStore):
    """Every batch's commit file is there (the reporter writes a pointer only for a committed batch)."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # no S3: exists() is all the reporter reads

    def exists(self, uri: str) -> bool:
        return True


def test_the_first_committed_batch_marks_the_drivers_start_in_every_pointer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The steps of the driver's start go with its pointers (the operator times the recovery from them);
    the first batch's parts are logged in Spark's words, once."""
    job, started = JobKey(namespace="ns", name="job"), datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    marks = StartMarks(started)
    marks.now("lease_acquired")
    stores = memory_stores()
    driver = Epoch("driver", 2, "job-2-driver")
    stores.checkpoints.advance_fence(job, driver, Epoch("operator", 1, "leader"), new=True)  # as a submission
    registered = datetime(2026, 11, 29, 12, 0, 5, tzinfo=UTC)
    began = datetime(2026, 11, 29, 12, 0, 9, tzinfo=UTC)
    # Batch 7's progress heard 1.5 s after its 2 s ended, its pointer written 0.3 s after that; then batch 8.
    ticks = iter([began + timedelta(seconds=s) for s in (3.5, 3.8, 3.8, 30, 30)])
    reporter = PointerReporter(
        stores.checkpoints,
        _Committed(),
        job,
        driver,
        retained=5,
        on_fenced=lambda why: None,
        marks=marks,
        clock=lambda: next(ticks),
    )
    with caplog.at_level(logging.INFO, logger="ftspark.runtime.reporting"):
        assert reporter.committed(
            "s3a://b/q",
            7,
            started_at=began,
            executors_registered=lambda: registered,
            durations={"addBatch": 900, "triggerExecution": 2000},
        )
        assert reporter.committed(
            "s3a://b/q", 8, started_at=began.replace(second=30), durations={"addBatch": 1}
        )
    second, first = stores.checkpoints.pointers(job)  # newest first
    assert first.start is not None and first.start == second.start, "every pointer says how the attempt began"
    assert (first.start.runtime_started, first.start.executors_registered) == (started, registered)
    assert first.start.first_batch_started == began and first.start.lease_acquired is not None
    logged = [r.getMessage() for r in caplog.records if "first batch" in r.getMessage()]
    assert logged == [
        "first batch of this attempt: batch 7, {'addBatch': 900, 'triggerExecution': 2000}; its progress "
        "heard 1.5 s after the batch ended, its pointer written 0.3 s later"
    ]
    assert first.completed_at == began + timedelta(seconds=3.8), "the pointer's time: when it is written"
