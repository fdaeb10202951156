"""An in-memory LeaseLock with the API server's compare-and-swap on a resource version."""

from __future__ import annotations

import threading

from ftspark.ports.leadership import ConflictError, LeaderElectionRecord


class InMemoryLease:
    """One lease object; every InMemoryLeaseLock on it is one contender."""

    def __init__(self, name: str = "ftspark-operator") -> None:
        self.name = name
        self._mutex = threading.Lock()
        self._record: LeaderElectionRecord | None = None
        self._version = 0

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

    def _write(self, record: LeaderElectionRecord) -> str:
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
