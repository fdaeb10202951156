"""A batch's figures: from Spark's progress report to the pointer, the status and the job's metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from ftspark.domain.ha import JobKey
from ftspark.domain.models import BatchFigures, CheckpointRef, JobStatus
from ftspark.metrics import JobMetrics
from ftspark.runtime.reporting import batch_figures


def progress(**changes: object) -> SimpleNamespace:
    """The attributes of pyspark's StreamingQueryProgress that are read."""
    fields: dict[str, object] = {
        "batchId": 7,
        "durationMs": {"triggerExecution": 1500, "addBatch": 1200},
        "numInputRows": 300,
        "inputRowsPerSecond": 120.5,
        "processedRowsPerSecond": 200.0,
        "stateOperators": [
            SimpleNamespace(numRowsTotal=40, memoryUsedBytes=4096),
            SimpleNamespace(numRowsTotal=2, memoryUsedBytes=512),
        ],
    }
    return SimpleNamespace(**(fields | changes))


def test_the_figures_of_a_progress_report() -> None:
    assert batch_figures(progress()) == BatchFigures(
        duration_ms=1500,
        input_rows=300,
        input_rows_per_second=120.5,
        processed_rows_per_second=200.0,
        state_rows=42,
        state_bytes=4608,
    )


def test_spark_s_nan_rates_are_zero_and_unreadable_figures_are_left_out() -> None:
    first = batch_figures(progress(inputRowsPerSecond=float("nan"), processedRowsPerSecond=float("inf")))
    assert first is not None and (first.input_rows_per_second, first.processed_rows_per_second) == (0.0, 0.0)
    assert batch_figures(progress(numInputRows=-1)) is None
    assert (
        batch_figures(progress(stateOperators=[SimpleNamespace(numRowsTotal=2**60, memoryUsedBytes=0)]))
        is None
    )


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
