"""The example job examples/windowed_counts.py as a test subject: its input, and what its sink wrote.

Shared by the driver-runtime tests (tests/runtime), the end-to-end suite (e2e/), the fault tour and the soak.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.subjects.subject import SinkFolder, Verdict, write_parts

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

    def lines(n: int) -> list[str]:
        return [
            f"{i},k{i % KEYS},{event_time(i)}"
            for i in range(n * RECORDS_PER_FILE, (n + 1) * RECORDS_PER_FILE)
        ]

    write_parts(folder, range(first_file, first_file + files), lines)


def expected_counts(files: int) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for i in range(files * RECORDS_PER_FILE):
        window = event_time(i) // 10 * 10
        counts[f"{window}/k{i % KEYS}"] += 1
    return dict(counts)


class Output(SinkFolder):
    """Per-batch counts (update mode) and how often each batch ran."""

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

    def reprocessed_records(self) -> int:
        """Records that went through the sink more than once (a batch that ran again)."""
        per_batch = self.records_per_batch()
        return sum((runs - 1) * per_batch.get(batch, 0) for batch, runs in self.runs().items())


@dataclass
class WindowedCounts:
    """Tumbling-window counts in update mode: every result is out as soon as its batch commits."""

    name: str = "counts"
    example: Path = EXAMPLE
    records_per_file: int = RECORDS_PER_FILE

    def write_input(self, folder: Path, files: int, first_file: int = 0) -> None:
        write_input(folder, files, first_file)

    def flush(self, folder: Path, fed: int) -> None:
        """Nothing: update mode emits every count with the batch that changed it."""

    def verdict(self, output: Path, fed: int) -> Verdict:
        sink, expected = Output(output), expected_counts(fed)
        counts = sink.counts()
        counted, records_in = sum(counts.values()), fed * RECORDS_PER_FILE
        return Verdict(
            records_in=records_in,
            counted=counted,
            lost=max(0, records_in - counted),
            duplicated=max(0, counted - records_in),
            wrong=sum(1 for group, count in counts.items() if expected.get(group) != count),
            reprocessed=sink.reprocessed_records(),
        )
