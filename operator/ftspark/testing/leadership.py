"""An in-memory LeaseLock with the API server's compare-and-swap on a resource version, and its int32
leaseTransitions."""

from __future__ import annotations

import threading

from ftspark.ports.leadership import ConflictError, LeaderElectionRecord, LockUnavailableError
from ftspark.protocol import MAX_TERM


class InMemoryLease:
    """One lease object; every InMemoryLeaseLock on it is one contender."""

    def __init__(self, name: str = "ftspark-operator") -> None:
        self.name = name
        self._mutex = threading.Lock()
        self._record: LeaderElectionRecord | None = None
        self._version = 0
        # Kept apart from the record (it survives delete()); any int, as a ConfigMap holds any text.
        self.term_floor: int | None = None

    def get(self) -> tuple[LeaderElectionRecord, str] | None:
        with self._mutex:
            return None if self._record is None else (self._record, str(self._version))

    def create(self, record: LeaderElectionRecord) -> str:
        with self._mutex:
            if self._record is not None:
                raise ConflictError(f"lease {self.name} already exists")
            return self._write(record)

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        with self._mutex:
            if self._record is None or str(self._version) != version:
                raise ConflictError(f"lease {self.name} is not at version {version}")
            return self._write(record)

    def delete(self) -> None:
        """As `kubectl delete lease`: the record goes, the term floor stays."""
        with self._mutex:
            self._record = None

    def raise_term_floor(self, term: int) -> None:
        with self._mutex:
            floor = self.term_floor
            # A floor no Lease's term could follow is replaced, as the ConfigMap's compare-and-swap replaces
            # the one the elector read as corrupt; otherwise it only goes up.
            self.term_floor = term if floor is None or floor >= MAX_TERM else max(floor, term)

    def _write(self, record: LeaderElectionRecord) -> str:
        if not 0 <= record.leader_transitions <= MAX_TERM:
            # The API server refuses it (leaseTransitions is an int32); the Lease lock reports that so.
            raise LockUnavailableError(f"lease {self.name}: leaseTransitions {record.leader_transitions}")
        self._record = record
        self._version += 1
        return str(self._version)


class InMemoryLeaseLock:
    def __init__(self, lease: InMemoryLease, identity: str) -> None:
        self._lease = lease
        self._identity = identity

    @property
    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return f"memory/{self._lease.name}"

    def get(self) -> tuple[LeaderElectionRecord, str] | None:
        return self._lease.get()

    def create(self, record: LeaderElectionRecord) -> str:
        return self._lease.create(record)

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        return self._lease.update(record, version)

    def term_floor(self) -> int | None:
        return self._lease.term_floor

    def raise_term_floor(self, term: int) -> None:
        self._lease.raise_term_floor(term)
