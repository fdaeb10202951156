"""The example job examples/sessions.py as a test subject: session windows in append mode, a shape of
state other than windowed counts (sessions merge across batches and are emitted once, when the watermark
closes them).

The input is built so that sessions span files (micro-batches): record i belongs to key k<i % KEYS> at event
time FIRST_EVENT_TIME + i + PAUSE * (i // BLOCK), so each key has an event every KEYS seconds inside a block
(less than the gap: one session) and a pause longer than the gap between blocks (a new session)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.subjects.subject import SinkFolder, Verdict, write_parts

EXAMPLE = REPO_ROOT / "examples" / "sessions.py"
RECORDS_PER_FILE = 20
KEYS = 5
BLOCK = 50  # records; 2.5 files, so a session is open across batches
PAUSE = 30  # seconds between blocks
GAP = 7  # the example's session gap
FIRST_EVENT_TIME = 1_700_100_000

Session = tuple[str, int, int, int]  # key, start, end (last event + gap), events


def event_time(record: int) -> int:
    return FIRST_EVENT_TIME + record + PAUSE * (record // BLOCK)


def record_line(i: int, time: int) -> str:
    return f"{i},k{i % KEYS},{time}"


def expected_sessions(records: int) -> set[Session]:
    """The batch computation: each key's events split where two are GAP seconds apart or more."""
    times: dict[str, list[int]] = defaultdict(list)
    for i in range(records):
        times[f"k{i % KEYS}"].append(event_time(i))
    sessions = set()
    for key, events in times.items():
        start = previous = events[0]
        count = 0
        for time in events:
            if time - previous >= GAP:
                sessions.add((key, start, previous + GAP, count))
                start, count = time, 0
            previous, count = time, count + 1
        sessions.add((key, start, previous + GAP, count))
    return sessions


@dataclass
class Sessions:
    name: str = "sessions"
    example: Path = EXAMPLE
    records_per_file: int = RECORDS_PER_FILE

    def write_input(self, folder: Path, files: int, first_file: int = 0) -> None:
        def lines(n: int) -> list[str]:
            records = range(n * RECORDS_PER_FILE, (n + 1) * RECORDS_PER_FILE)
            return [record_line(i, event_time(i)) for i in records]

        write_parts(folder, range(first_file, first_file + files), lines)

    def flush(self, folder: Path, fed: int) -> None:
        """One event per key far past the last: the watermark passes every session of the fed files."""
        first, late = fed * RECORDS_PER_FILE, event_time(fed * RECORDS_PER_FILE) + 10 * (PAUSE + GAP)
        write_parts(
            folder, range(fed, fed + 1), lambda _: [record_line(i, late) for i in range(first, first + KEYS)]
        )

    def verdict(self, output: Path, fed: int) -> Verdict:
        sink, expected = SinkFolder(output), expected_sessions(fed * RECORDS_PER_FILE)
        emitted: Counter[Session] = Counter()
        for rows in sink.batches().values():
            emitted.update(tuple(row) for row in rows)
        runs = sink.runs()
        rerun_events = sum(
            (runs[batch] - 1) * sum(row[3] for row in rows)
            for batch, rows in sink.batches().items()
            if runs[batch] > 1
        )
        return Verdict(
            records_in=sum(session[3] for session in expected),
            counted=sum(session[3] * n for session, n in emitted.items() if session in expected),
            lost=sum(session[3] for session in expected if session not in emitted),
            duplicated=sum(session[3] * (n - 1) for session, n in emitted.items() if session in expected),
            wrong=sum(1 for session in emitted if session not in expected),
            reprocessed=rerun_events,
        )
