"""A streaming example as a test subject: its script, its input and the exactly-once check of its output.

The fault tour and the soak drive any subject the same way: feed files, count committed batches, then flush
and compare the sink's output with the result computed from the whole input at once (the batch computation).
windowed_counts.WindowedCounts and sessions.Sessions are the two; a new one implements Subject."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Verdict:
    """The sink's output against the batch computation, in records (input lines)."""

    records_in: int
    counted: int
    lost: int
    duplicated: int
    wrong: int  # results the batch computation does not have (a count or a session that is off)
    reprocessed: int  # records that went through the sink more than once (a batch that ran again)

    @property
    def exact(self) -> bool:
        return self.counted == self.records_in and not (self.lost or self.duplicated or self.wrong)


class Subject(Protocol):
    name: str
    example: Path
    records_per_file: int

    def write_input(self, folder: Path, files: int, first_file: int = 0) -> None:
        """Files part-<n>.txt, n from first_file, each written whole (the file source never sees half)."""

    def flush(self, folder: Path, fed: int) -> None:
        """Input after the last fed file that lets every result of the fed files be emitted."""

    def verdict(self, output: Path, fed: int) -> Verdict: ...


def write_parts(folder: Path, parts: range, lines: Callable[[int], list[str]]) -> None:
    """Files part-<n>.txt for n in parts, each whole (the file source must never see half a file), with
    modification times a millisecond apart in the order of n: Spark's file source takes files in the order of
    their times, and files of one call could otherwise share one (an event-time job would see late data)."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time_ns()
    for order, n in enumerate(parts):
        staged = folder / f".part-{n:05d}.txt"
        staged.write_text("\n".join(lines(n)) + "\n")
        stamp = now + order * 1_000_000
        os.utime(staged, ns=(stamp, stamp))
        staged.rename(folder / f"part-{n:05d}.txt")


@dataclass
class SinkFolder:
    """What an example's foreachBatch sink wrote: batch-<id>.json per batch, runs/<id>-<random> per run."""

    folder: Path

    def batches(self) -> dict[int, Any]:
        if not self.folder.exists():
            return {}
        found = {}
        for path in self.folder.glob("batch-*.json"):
            found[int(path.stem.removeprefix("batch-"))] = json.loads(path.read_text())
        return dict(sorted(found.items()))

    def runs(self) -> Counter[int]:
        runs = self.folder / "runs"
        return Counter(int(p.name.split("-", 1)[0]) for p in runs.iterdir()) if runs.exists() else Counter()
