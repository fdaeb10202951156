"""Every committed micro-batch becomes a checkpoint pointer in the job's checkpoint store (ConfigMap
`<job>-checkpoints`; docs/architecture.md, "Objects" and "Fencing").

Spark's progress event for batch n arrives after commits/n was written, but an idle query also sends
progress events (for the batch it would run next), so a pointer is only written once commits/n is seen in
storage — which also keeps a pointer from ever coming before the data it points to. Writes are fenced by the
attempt (driver scope); a FencedOutError means a newer attempt exists or the job is gone: this driver is
fenced out.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError
from pyspark.sql.streaming.listener import StreamingQueryListener

from ftspark.domain.fencing import Epoch, FencedOutError
from ftspark.domain.ha import CheckpointPointer, DriverStart, JobKey
from ftspark.domain.models import BatchFigures
from ftspark.ports.stores import CheckpointStore, StoreUnavailableError
from ftspark.runtime.liveness import SignsOfLife
from ftspark.runtime.objects import ObjectStore, StorageError, join
from ftspark.runtime.session import Queries

log = logging.getLogger(__name__)


DriverStep = Literal[
    "promoted", "lease_acquired", "executors_registered", "session_up", "first_batch_started"
]


class StartMarks:
    """This driver's start as it goes (DriverStart): each step marked once, from whichever thread reaches it;
    every pointer carries them, so the operator can time the recovery this attempt ends."""

    def __init__(self, runtime_started: datetime) -> None:
        self._lock = threading.Lock()
        self._start = DriverStart(runtime_started=runtime_started)

    def mark(self, step: DriverStep, at: datetime | None) -> None:
        """at: when the step was done (None: not known, left unmarked); only its first mark counts."""
        with self._lock:
            if at is not None and getattr(self._start, step) is None:
                self._start = self._start.model_copy(update={step: at})

    def now(self, step: DriverStep) -> None:
        self.mark(step, datetime.now(UTC))

    def marked(self, step: DriverStep) -> bool:
        with self._lock:
            return getattr(self._start, step) is not None

    def snapshot(self) -> DriverStart:
        with self._lock:
            return self._start


class PointerReporter:
    def __init__(
        self,
        checkpoints: CheckpointStore,
        objects: ObjectStore,
        job: JobKey,
        epoch: Epoch,
        *,
        retained: int,
        on_fenced: Callable[[str], None],
        marks: StartMarks,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._marks = marks
        self._clock = clock
        self._checkpoints = checkpoints
        self._objects = objects
        self._job = job
        self._epoch = epoch
        self._retained = retained
        self._on_fenced = on_fenced
        self._lock = threading.Lock()
        self._reported: dict[str, int] = {}  # location → newest batch with a pointer

    def last_committed(self) -> dict[str, int]:
        with self._lock:
            return dict(self._reported)

    def committed(
        self,
        location: str,
        batch_id: int,
        offsets: dict[str, str] | None = None,
        figures: BatchFigures | None = None,
        *,
        started_at: datetime | None = None,
        executors_registered: Callable[[], datetime | None] | None = None,
        durations: dict[str, int] | None = None,
    ) -> bool:
        """Write the pointer of batch_id unless written already; False if it could not be written.
        started_at: when Spark began the batch; executors_registered: asked once, at the first batch;
        durations: Spark's milliseconds per part of the batch (logged for the first)."""
        heard = self._clock()
        with self._lock:
            if batch_id <= self._reported.get(location, -1):
                return True
            try:
                if not self._objects.exists(join(location, "commits", str(batch_id))):
                    return False  # an idle query's event: that batch has not run
                first = not self._marks.marked("first_batch_started")
                if first:
                    if executors_registered is not None:
                        self._marks.mark("executors_registered", executors_registered())
                    self._marks.mark("first_batch_started", started_at)
                self._add(location, batch_id, offsets or {}, figures)
                if first:
                    # Its time by part (planning, the state's read, the batch), in Spark's words, and what
                    # came after it until the operator could know: the progress event, the pointer's write.
                    log.info(
                        "first batch of this attempt: batch %s, %s%s",
                        batch_id,
                        durations or "no durations",
                        _reported_after(started_at, durations, heard, self._clock()),
                    )
            except FencedOutError as error:
                self._on_fenced(f"fenced out of the checkpoint store: {error}")
                return False
            except (StoreUnavailableError, StorageError) as error:
                # The next batch's pointer supersedes this one; the operator verifies pointers anyway.
                log.warning("no pointer for batch %s of %s: %s", batch_id, location, error)
                return False
            self._reported[location] = batch_id
            log.info("checkpoint pointer: batch %s of %s", batch_id, location)
            return True

    def _add(
        self, location: str, batch_id: int, offsets: dict[str, str], figures: BatchFigures | None
    ) -> None:
        for _ in range(3):
            pointer = CheckpointPointer(
                # The counter is the job's, across attempts: ids never go backwards.
                checkpoint_id=self._checkpoints.counter(self._job) + 1,
                batch_id=batch_id,
                location=location,
                completed_at=self._clock(),
                attempt=self._epoch.term,
                source_end_offsets=offsets,
                figures=figures,
                start=self._marks.snapshot(),
            )
            try:
                self._checkpoints.add(self._job, pointer, self._epoch, retained=self._retained)
                return
            except ValueError:
                continue  # the counter moved between read and write: read it again
        raise StoreUnavailableError(f"{self._job}: the checkpoint counter keeps moving")


def _reported_after(
    started_at: datetime | None, durations: dict[str, int] | None, heard: datetime, written: datetime
) -> str:
    """When Spark's batch ended (its start and triggerExecution, on this driver's clock), how long until its
    progress event reached the runtime, and until its pointer was written."""
    took = (durations or {}).get("triggerExecution")
    if started_at is None or took is None:
        return ""
    ended = started_at + timedelta(milliseconds=took)
    return (
        f"; its progress heard {(heard - ended).total_seconds():.1f} s after the batch ended, "
        f"its pointer written {(written - heard).total_seconds():.1f} s later"
    )


def batch_figures(progress: Any) -> BatchFigures | None:
    """The figures of Spark's progress report (StreamingQueryProgress); None if they do not read as such.
    Spark's rates are NaN when it has nothing to divide by (the first batch): 0 here."""

    def rate(value: Any) -> float:
        number = float(value)
        return number if math.isfinite(number) and number >= 0 else 0.0

    operators = list(progress.stateOperators)
    try:
        return BatchFigures(
            duration_ms=int((progress.durationMs or {}).get("triggerExecution", 0)),
            input_rows=int(progress.numInputRows),
            input_rows_per_second=rate(progress.inputRowsPerSecond),
            processed_rows_per_second=rate(progress.processedRowsPerSecond),
            state_rows=sum(int(op.numRowsTotal) for op in operators),
            state_bytes=sum(int(op.memoryUsedBytes) for op in operators),
        )
    except (ValidationError, TypeError, ValueError) as error:
        log.warning("batch %s: its figures are not reported: %s", progress.batchId, error)
        return None


def _durations(progress: Any) -> dict[str, int]:
    """Spark's milliseconds per part of a batch; none if they do not read as such (never raises: the pointer
    comes first)."""
    try:
        return {str(part): int(ms) for part, ms in (progress.durationMs or {}).items()}
    except (AttributeError, TypeError, ValueError):
        return {}


def _timestamp(value: Any) -> datetime | None:
    """Spark's progress timestamp (ISO 8601, UTC); None if it does not read as one."""
    try:
        return datetime.fromisoformat(str(value)).astimezone(UTC)
    except ValueError:
        return None


class ProgressListener(StreamingQueryListener):
    """Runs on Spark's listener thread; never raises into it. Every event of a query is a sign of life
    (runtime/liveness.py), recorded before anything that could take a while."""

    def __init__(
        self,
        queries: Queries,
        reporter: PointerReporter,
        signs: SignsOfLife,
        first_executor: Callable[[], datetime | None],
    ) -> None:
        super().__init__()
        self._queries = queries
        self._reporter = reporter
        self._signs = signs
        self._first_executor = first_executor

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.started(str(event.id), event.name)
        log.info("query %s (%s) started", event.id, event.name)

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        progress = event.progress
        self._signs.heard(str(progress.id))
        try:
            running = self._queries.lookup(str(progress.id))
            if running is None:
                log.error("progress of unknown query %s", progress.id)
                return
            offsets = {
                f"{i}:{source.description}"[:200]: str(source.endOffset)
                for i, source in enumerate(progress.sources)
            }
            self._reporter.committed(
                running.location,
                int(progress.batchId),
                offsets,
                batch_figures(progress),
                started_at=_timestamp(progress.timestamp),
                executors_registered=self._first_executor,
                durations=_durations(progress),
            )
        except Exception:
            log.exception("reporting the progress of query %s failed", progress.id)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.heard(str(event.id))

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.ended(str(event.id))
        log.info("query %s terminated%s", event.id, f": {event.exception}" if event.exception else "")
