"""The HA stores: job graphs, checkpoint pointers, job results (docs/architecture.md, "Objects" and
"Fencing"). Every write is conditional and fenced by the writer's Epoch.

Implementations: adapters.k8s (ConfigMaps), adapters.s3, and the test double ftspark.testing.stores. A new
backend implements adapters.records.Records (stores_on builds these three stores on it, fencing included)
and gets a builder in the `backend` fixture of tests/contract/conftest.py, so that the contract suite
(tests/contract: test_job_graph_store, test_checkpoint_store, test_result_store) runs against it as against
the others; the operator's --ha-store setting selects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import CheckpointPointer, JobGraph, JobKey, JobResultEntry


class StoreUnavailableError(Exception):
    """The backing service could not be reached or answered with an error; nothing is known to be written."""


class UntrustedRecordError(Exception):
    """A record points at something the operator did not write for its job (a forged or edited pointer).

    Records live where tenants can write (their namespace, their jobs' storage): what such a pointer names is
    neither used nor deleted.
    """


class JobGraphStore(Protocol):
    def put(self, graph: JobGraph, epoch: Epoch, *, new: bool = False) -> None:
        """Write (or replace) the job's graph. Large graphs keep only a pointer in the small store.
        new: the caller found no record; it is created without a read first (fenced all the same)."""

    def get(self, job: JobKey) -> JobGraph | None:
        """UntrustedRecordError if the record points at anything but a payload written for this job."""

    def jobs(self) -> list[JobKey]:
        """Every job that has a graph (a new leader adopts them)."""

    def delete(self, job: JobKey, epoch: Epoch) -> None:
        """Pointer first, payload after (two-phase delete); a payload that is not the job's own stays, with a
        warning."""


class CheckpointStore(Protocol):
    def add(self, job: JobKey, pointer: CheckpointPointer, epoch: Epoch, *, retained: int) -> None:
        """Record a completed checkpoint; keeps the newest `retained`; the counter never goes backwards.

        A pointer whose id is not above the counter is refused (ValueError): ids never repeat.
        """

    def pointers(self, job: JobKey) -> list[CheckpointPointer]:
        """Retained pointers, newest first."""

    def counter(self, job: JobKey) -> int:
        """The highest checkpoint id ever recorded for the job, -1 if none."""

    def advance_fence(self, job: JobKey, driver_epoch: Epoch, epoch: Epoch, *, new: bool = False) -> None:
        """Before attempt N's pod exists: refuse every later write from drivers of attempts below N.
        new: as for JobGraphStore.put, the caller expects no record yet."""

    def delete(self, job: JobKey, epoch: Epoch) -> None: ...


class ResultStore(Protocol):
    def create_dirty(self, result: JobResultEntry, epoch: Epoch) -> None:
        """Create the dirty entry; an entry for the same uid already there is kept (no overwrite)."""

    def mark_clean(self, uid: str, epoch: Epoch) -> None: ...

    def get(self, uid: str) -> JobResultEntry | None: ...

    def entries(self) -> list[JobResultEntry]: ...

    def delete(self, uid: str, epoch: Epoch) -> None:
        """Expire a clean entry (result-store TTL)."""


@dataclass(frozen=True)
class HaStores:
    """The three stores the operator keeps a job's HA data in, on one backend (adapters.records.stores_on)."""

    job_graphs: JobGraphStore
    checkpoints: CheckpointStore
    results: ResultStore
