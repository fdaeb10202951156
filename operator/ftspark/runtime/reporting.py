"""Every committed micro-batch becomes a checkpoint pointer in the job's checkpoint store (ConfigMap
`<job>-checkpoints`; docs/architecture.md, "Objects" and "Fencing").

Spark's progress event for batch n arrives after commits/n was written, but an idle query also sends
progress events (for the batch it would run next), so a pointer is only written once commits/n is seen in
storage — which also keeps a pointer from ever coming before the data it points to. Writes are fenced by the
attempt (driver scope); a FencedOutError means a newer attempt exists or the job is gone: this driver is
fenced out.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pyspark import SparkContext
from pyspark.sql.streaming.listener import JStreamingQueryListener, StreamingQueryListener

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


class _SparkJson(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class SourceProgress(_SparkJson):
    description: str = ""
    end_offset: Any = None  # the source's offset, which Spark's report carries as JSON


class StateOperatorProgress(_SparkJson):
    num_rows_total: int = 0
    memory_used_bytes: int = 0


class SparkProgress(_SparkJson):
    """The parts of Spark's progress report (StreamingQueryProgress's JSON) that are read. Spark leaves a
    rate it has nothing to divide by (NaN) out of it: 0 here."""

    id: str
    batch_id: int
    timestamp: str = ""
    num_input_rows: int = 0
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    duration_ms: dict[str, int] = Field(default_factory=dict)
    state_operators: list[StateOperatorProgress] = Field(default_factory=list)
    sources: list[SourceProgress] = Field(default_factory=list)

    def source_end_offsets(self) -> dict[str, str]:
        """Each source's end offset as its offsets log has it (compact JSON)."""
        return {
            f"{i}:{source.description}"[:200]: json.dumps(
                source.end_offset, separators=(",", ":"), ensure_ascii=False
            )
            for i, source in enumerate(self.sources)
        }


def batch_figures(progress: SparkProgress) -> BatchFigures | None:
    """The figures of Spark's progress report; None if they do not read as such."""
    operators = progress.state_operators
    try:
        return BatchFigures(
            duration_ms=progress.duration_ms.get("triggerExecution", 0),
            input_rows=progress.num_input_rows,
            input_rows_per_second=progress.input_rows_per_second,
            processed_rows_per_second=progress.processed_rows_per_second,
            state_rows=sum(op.num_rows_total for op in operators),
            state_bytes=sum(op.memory_used_bytes for op in operators),
        )
    except ValidationError as error:
        log.warning("batch %s: its figures are not reported: %s", progress.batch_id, error)
        return None


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
        self._jvm_side: Any = None

    @property
    def _jlistener(self) -> Any:
        """What pyspark's addListener registers with the JVM: _JsonProgress instead of pyspark's adapter."""
        if self._jvm_side is None:
            jvm = SparkContext._jvm
            assert jvm is not None, "a listener is added to a running session"
            self._jvm_side = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(self))
        return self._jvm_side

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.started(str(event.id), event.name)
        log.info("query %s (%s) started", event.id, event.name)

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        """pyspark's own event, converted by pyspark (where it does not ask for _jlistener)."""
        self.progressed(SparkProgress.model_validate_json(event.progress.json))

    def progressed(self, progress: SparkProgress) -> None:
        self._signs.heard(progress.id)
        try:
            running = self._queries.lookup(progress.id)
            if running is None:
                log.error("progress of unknown query %s", progress.id)
                return
            self._reporter.committed(
                running.location,
                progress.batch_id,
                progress.source_end_offsets(),
                batch_figures(progress),
                started_at=_timestamp(progress.timestamp),
                executors_registered=self._first_executor,
                durations=progress.duration_ms,
            )
        except Exception:
            log.exception("reporting the progress of query %s failed", progress.id)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.heard(str(event.id))

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        self._signs.ended(str(event.id))
        log.info("query %s terminated%s", event.id, f": {event.exception}" if event.exception else "")


class _JsonProgress(JStreamingQueryListener):
    """The JVM's calls to the Python listener (py4j) as pyspark's adapter makes them, but a progress event
    is read as the JSON the JVM makes of it, in one call: pyspark asks the JVM for each of its fields, some
    60 calls, 0.2 s a batch on two idle cores and up to 0.7 s on busy ones, and every pointer waited for
    them (docs/driver-runtime.md, "Checkpoint pointers")."""

    def __init__(self, listener: ProgressListener) -> None:
        super().__init__(listener)
        self._listener = listener

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 (Spark's names)
        try:
            progress = SparkProgress.model_validate(json.loads(jevent.json())["progress"])
        except (ValueError, KeyError) as error:  # pydantic's ValidationError is a ValueError
            log.error("a progress event that does not read as Spark's: %s", error)
            return
        self._listener.progressed(progress)
