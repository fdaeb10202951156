"""The example job examples/windowed_counts.py as a test subject: its input, and what its sink wrote.

Shared by the driver-runtime tests (tests/runtime) and the end-to-end suite (e2e/).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ftspark_dev.controlplane import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "windowed_counts.py"
RECORDS_PER_FILE = 20
KEYS = 3
# Event times start half a window in, so every file's last window is finished by the next file (the next
# micro-batch): the counts then depend on state carried across batches, and lost state shows as a wrong count.
FIRST_EVENT_TIME = 1_700_000_005


def event_time(record: int) -> int:
    return FIRST_EVENT_TIME + record


def write_input(folder: Path, files: int, first_file: int = 0) -> None:
    """Files of RECORDS_PER_FILE records `<id>,<key>,<epoch seconds>`: ids and times count up."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(first_file, first_file + files):
        lines = [
            f"{i},k{i % KEYS},{event_time(i)}"
            for i in range(n * RECORDS_PER_FILE, (n + 1) * RECORDS_PER_FILE)
        ]
        staged = folder / f".part-{n:05d}.txt"
        staged.write_text("\n".join(lines) + "\n")
        staged.rename(folder / f"part-{n:05d}.txt")  # the file source must never see half a file


def expected_counts(files: int) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for i in range(files * RECORDS_PER_FILE):
        window = event_time(i) // 10 * 10
        counts[f"{window}/k{i % KEYS}"] += 1
    return dict(counts)


@dataclass
class Output:
    """What the example's sink wrote: per-batch counts and how often each batch ran."""

    folder: Path

    def batches(self) -> dict[int, dict[str, int]]:
        found = {}
        for path in self.folder.glob("batch-*.json"):
            found[int(path.stem.removeprefix("batch-"))] = json.loads(path.read_text())
        return dict(sorted(found.items()))

    def counts(self) -> dict[str, int]:
        """Update mode: a batch carries the new totals of the groups it changed; later batches win."""
        totals: dict[str, int] = {}
        for rows in self.batches().values():
            totals.update(rows)
        return totals

    def records_per_batch(self) -> dict[int, int]:
        totals: dict[str, int] = {}
        records = {}
        for batch, rows in self.batches().items():
            records[batch] = sum(count - totals.get(group, 0) for group, count in rows.items())
            totals.update(rows)
        return records

    def runs(self) -> Counter[int]:
        return Counter(int(p.name.split("-", 1)[0]) for p in (self.folder / "runs").iterdir())

    def reprocessed_records(self) -> int:
        """Records that went through the sink more than once (a batch that ran again)."""
        per_batch = self.records_per_batch()
        return sum((runs - 1) * per_batch.get(batch, 0) for batch, runs in self.runs().items())
