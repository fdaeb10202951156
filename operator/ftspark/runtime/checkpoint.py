"""Spark's checkpoint directory of one query, read and repaired through the ObjectStore (the rollback rules:
docs/driver-runtime.md, "Rollback of a damaged checkpoint").

    metadata                 the query id
    offsets/<n>              write-ahead log: "v1", a metadata line, one offset line per source
    commits/<n>              written after batch n's sink finished
    sources/<i>/<n>[.compact]  file-source logs (entries of batch n)
    state/<op>/<part>/<v>.(delta|snapshot|zip|changelog), plus other files (RocksDB SSTs, _metadata)

Batch n produces state version n + 1. A version is a "base" (snapshot, zip) or applies on the previous one
(delta, changelog), so version v needs the newest base at or below v and every delta after it.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ftspark.runtime.objects import ObjectStore, join

_STATE_FILE = re.compile(r"^(\d+)\.(delta|snapshot|zip|changelog)$")
_SOURCE_FILE = re.compile(r"^(\d+)(\.compact)?$")
_BASES = frozenset({"snapshot", "zip"})
_LZ4_MAGIC = b"LZ4Block"  # Spark's default state-store codec (LZ4BlockOutputStream) starts every file so
# A restart's check reads each log it needs and each partition's newest state file at once: one round trip
# to S3 instead of one per file, on the takeover's path.
_PARALLEL_READS = 8


class CheckpointError(Exception):
    """The checkpoint directory holds no batch that can be restored."""


@dataclass(frozen=True)
class Rollback:
    location: str
    from_batch: int
    to_batch: int
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: rolled back from batch {self.from_batch} to {self.to_batch} ({self.reason})"


class CheckpointDir:
    """One query's checkpoint directory. It is listed once, when first needed, and read from that listing
    until its own rollback deletes files: a restarting driver is the directory's only writer, and a
    savepoint copies a batch that is committed already."""

    def __init__(self, store: ObjectStore, location: str) -> None:
        self.store = store
        self.location = location.rstrip("/")
        self._listing: dict[str, int] | None = None

    def _listed(self, folder: str) -> dict[str, int]:
        """Sizes of the files under folder (e.g. "state"), by path relative to it."""
        if self._listing is None:
            self._listing = self.store.list(self.location)
        prefix = f"{folder}/"
        return {
            name.removeprefix(prefix): size for name, size in self._listing.items() if name.startswith(prefix)
        }

    def batches(self, log: str) -> list[int]:
        """Batch ids in offsets/ or commits/, ascending (Spark's temp files are skipped)."""
        return sorted(int(name) for name in self._listed(log) if name.isdigit())

    def latest_commit(self) -> int | None:
        committed = self.batches("commits")
        return committed[-1] if committed else None

    def has_metadata(self) -> bool:
        return self.store.exists(join(self.location, "metadata"))

    def problems(self, batch: int) -> list[str]:
        """Why batch cannot be restored (its logs or state version batch + 1 damaged); [] if it can."""
        # Spark restarts with the previous batch's offsets as the committed ones: they must be readable too.
        logs = [f"offsets/{batch}", f"commits/{batch}", *([f"offsets/{batch - 1}"] if batch > 0 else [])]
        state = self._listed("state")
        versioned = _state_versions(state)
        chains: dict[str, list[int]] = {}
        gaps: dict[str, KeyError] = {}
        for partition, versions in versioned.items():
            try:
                chains[partition] = _chain(versions, batch + 1)
            except KeyError as missing:
                gaps[partition] = missing
        newest = {
            partition: f"{partition}/{batch + 1}.{versioned[partition][batch + 1]}" for partition in chains
        }
        with ThreadPoolExecutor(max_workers=_PARALLEL_READS) as pool:
            log_problems = pool.map(self._log_problem, logs)
            state_problems = pool.map(
                lambda name: self._state_problem(f"state/{name}", state[name]), newest.values()
            )
            found = [f"{name} {problem}" for name, problem in zip(logs, log_problems, strict=True) if problem]
            damaged = dict(zip(newest, state_problems, strict=True))
        for partition, versions in versioned.items():
            if partition in gaps:
                found.append(f"state/{partition}: version {gaps[partition]} missing")
                continue
            if damaged[partition]:
                found.append(f"state/{newest[partition]} {damaged[partition]}")
            found.extend(
                f"state/{partition}/{v}.{versions[v]} is empty"
                for v in chains[partition]
                if state[f"{partition}/{v}.{versions[v]}"] == 0
            )
        return found

    def files_for(self, batch: int) -> list[str]:
        """The files a restart after batch needs, relative to the directory (what a savepoint copies)."""
        files = ["metadata", f"offsets/{batch}", f"commits/{batch}"]
        if batch > 0:  # Spark resumes with the previous batch's offsets as the committed ones
            files.append(f"offsets/{batch - 1}")
        for name in self._listed("sources"):
            match = _SOURCE_FILE.match(name.rsplit("/", 1)[-1])
            if match and int(match.group(1)) <= batch:
                files.append(f"sources/{name}")
        state = self._listed("state")
        versioned = _state_versions(state)
        for partition, versions in versioned.items():
            files.extend(f"state/{partition}/{v}.{versions[v]}" for v in _chain(versions, batch + 1))
        files.extend(f"state/{name}" for name in state if not _STATE_FILE.match(name.rsplit("/", 1)[-1]))
        return files

    def rollback(self, batch: int) -> list[str]:
        """Make batch (-1: none) the newest committed one, as Spark's own advice says: delete later commits,
        later offsets (batch + 1's stays if readable: it re-runs with exactly the logged offsets), their
        file-source log entries and later state versions. Commits go first, so an interrupted rollback is
        finished by the next one. Returns the deleted files."""
        keep_next = not self._log_problem(f"offsets/{batch + 1}")
        first_dropped = batch + 2 if keep_next else batch + 1
        doomed = [f"commits/{n}" for n in reversed(self.batches("commits")) if n > batch]
        doomed += [f"offsets/{n}" for n in reversed(self.batches("offsets")) if n >= first_dropped]
        for name in self._listed("sources"):
            match = _SOURCE_FILE.match(name.rsplit("/", 1)[-1])
            if match and int(match.group(1)) >= first_dropped:
                doomed.append(f"sources/{name}")
        for name in self._listed("state"):
            match = _STATE_FILE.match(name.rsplit("/", 1)[-1])
            if match and int(match.group(1)) > batch + 1:
                doomed.append(f"state/{name}")
        if doomed:
            self._listing = None  # listed again when next asked
        for name in doomed:
            self.store.delete(join(self.location, name))
        return doomed

    def repair(self, restore_batch: int | None) -> Rollback | None:
        """Roll back to restore_batch if given, and further back past any damaged batch, cleaning up what a
        crash left beyond the batch kept; a Rollback if committed batches were given up, else None."""
        committed = self.batches("commits")
        if not committed:
            self.rollback(-1)  # an unreadable uncommitted offsets/0 would stop Spark cold
            return None
        latest = committed[-1]
        reasons = []
        if restore_batch is not None and restore_batch < latest:
            reasons.append(f"the operator restores batch {restore_batch}")
        for batch in reversed(committed):
            if restore_batch is not None and batch > restore_batch:
                continue
            problems = self.problems(batch)
            if problems:
                reasons.append(f"batch {batch}: {', '.join(problems)}")
                continue
            self.rollback(batch)
            return None if batch == latest else Rollback(self.location, latest, batch, "; ".join(reasons))
        raise CheckpointError(
            f"{self.location}: no restorable batch among {committed}: {'; '.join(reasons)}; manual restore "
            "required (start from a savepoint, or use a fresh checkpoint directory)"
        )

    def _log_problem(self, name: str) -> str:
        data = self.store.read(join(self.location, name))
        if data is None:
            return "is missing"
        try:
            lines = data.decode().splitlines()
        except UnicodeDecodeError:
            return "is not text"
        if not lines or not re.fullmatch(r"v\d+", lines[0]):
            return "has no version header"
        for line in lines[1:]:
            if line and line != "-":
                try:
                    json.loads(line)
                except json.JSONDecodeError:
                    return "holds a line that is not JSON"
        return ""

    def _state_problem(self, name: str, size: int) -> str:
        if size == 0:
            return "is missing or empty"
        # A zip is checked whole; every other state file by its first bytes only, so that a restart reads
        # no more state from S3 than Spark itself will (task-local recovery serves that from the nodes).
        whole = name.endswith(".zip")
        data = self.store.read(join(self.location, name), first=None if whole else len(_LZ4_MAGIC))
        if not data:
            return "is missing or empty"
        if whole:
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    bad = archive.testzip()
            except zipfile.BadZipFile:
                return "is not a zip file"
            return f"has a damaged entry {bad}" if bad else ""
        if name.endswith((".delta", ".snapshot")) and not data.startswith(_LZ4_MAGIC):
            return "is not an LZ4 stream"
        return ""


def _state_versions(state: dict[str, int]) -> dict[str, dict[int, str]]:
    """state/ files by partition folder ("<op>/<part>") and version: the version's file kind."""
    found: dict[str, dict[int, str]] = defaultdict(dict)
    for name in state:
        folder, _, file = name.rpartition("/")
        match = _STATE_FILE.match(file)
        if match:
            version, kind = int(match.group(1)), match.group(2)
            # A base and a delta of the same version: the base is enough.
            if kind in _BASES or version not in found[folder]:
                found[folder][version] = kind
    return found


def _chain(versions: dict[int, str], version: int) -> list[int]:
    """The versions that make up `version`, oldest first; KeyError(v) for the first missing one."""
    chain = []
    current = version
    while current > 0:
        if current not in versions:
            raise KeyError(current)
        chain.append(current)
        if versions[current] in _BASES:
            break
        current -= 1
    return list(reversed(chain))
