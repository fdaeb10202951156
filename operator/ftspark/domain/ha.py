"""What the HA stores hold: job graphs, checkpoint pointers, job results (ports/stores.py). Pure data."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from ftspark.domain.models import BatchFigures, JobSpec, ResultState


class JobKey(BaseModel):
    model_config = ConfigDict(frozen=True)
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class JobGraph(BaseModel):
    """The resolved submission: what was actually launched, written before any pod is created."""

    model_config = ConfigDict(frozen=True)
    job: JobKey
    uid: str = Field(
        description="The custom resource's uid: a re-created resource of the same name is a new job."
    )
    generation: int
    spec_hash: str
    spec: JobSpec
    checkpoint_location: str = Field(description="s3:// directory Spark uses as checkpointLocation.")
    submitted_at: datetime


class DriverStart(BaseModel):
    """When an attempt's driver reached each step of its start, on its own clock. It goes with the attempt's
    checkpoint pointers, so the operator can say where a recovery's seconds went (status.lastFailure.
    recoveryPhases). The driver's word only: the operator bounds what it makes of it by its own times."""

    model_config = ConfigDict(frozen=True)
    runtime_started: datetime  # the runtime's Python began (the container started before)
    promoted: datetime | None = None  # a hot standby: its promotion reached it
    lease_acquired: datetime | None = None  # it holds the driver Lease: older drivers are fenced out
    executors_registered: datetime | None = None  # the first of its current executors registered
    session_up: datetime | None = None  # its SparkSession is built
    first_batch_started: datetime | None = None  # the first batch it committed began (Spark's trigger)


class CheckpointPointer(BaseModel):
    """A completed checkpoint (a committed micro-batch) as reported by the driver."""

    model_config = ConfigDict(frozen=True)
    checkpoint_id: int = Field(ge=0)
    batch_id: int = Field(ge=0)
    location: str
    completed_at: datetime
    attempt: int = Field(ge=0)
    source_end_offsets: dict[str, str] = Field(default_factory=dict)
    figures: BatchFigures | None = None  # from Spark's progress report; None: found committed at a stop
    start: DriverStart | None = None  # how the attempt that wrote it started


class JobResultEntry(BaseModel):
    """FLIP-194: a finished job's result, dirty until its resources are cleaned up, then clean."""

    model_config = ConfigDict(frozen=True)
    job: JobKey
    uid: str
    state: ResultState
    finished_at: datetime
    message: str = ""
    clean: bool = False
    retain_seconds: int = Field(
        default=0,
        ge=0,
        description="Kept this long after finished_at, and until the job's resource is gone; 0: forever.",
    )
    data: tuple[str, ...] = Field(
        default=(),
        description="s3:// prefixes of the job's data deleted before the entry (checkpoint.retainOnDelete "
        "leaves them out); only the operator writes them, from the job's storage and uid.",
    )
