"""How a driver ends: the exit code and the termination message Kubernetes keeps in the pod's status
(terminationMessagePath, at most 4096 bytes), which the operator reads.

The message is JSON: {"reason", "exitCode", "message", "lastCommitted": {query: batch}, "rollbacks": [...]}.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ftspark.protocol import Exit, TerminationMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4096
MAX_SUMMARY = 900  # characters: the operator keeps 1,024 of a driver's message

# A Python exception's own line ("ValueError: …", "pyspark.errors.X: …") inside a longer text.
_PYTHON_ERROR = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b.*"
)
_CAUSED_BY = "Caused by: "


def failure_summary(error: BaseException) -> str:
    """A script's failure in one line a user can act on: the exception's type and the first line of its
    message, and, when Spark wraps the real failure (a streaming query's exception carries the executor's
    Python traceback and Java's chain of causes), that root cause: the last Python error of the last
    traceback in the text, else Java's deepest "Caused by". The last line of the text is often neither
    (`Driver stacktrace:`, a JVM frame)."""
    text = str(error)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    head = f"{type(error).__name__}: {first}" if first else type(error).__name__
    cause = _root_cause(text)
    summary = f"{head} (caused by {cause})" if cause and cause not in head else head
    return _bounded(summary)


class StderrTail:
    """sys.stderr while the script runs: all it writes passes through, and the end of it is kept, so that a
    script that prints why and then calls sys.exit(2) has that why in its failure, not only its exit code.
    Only Python's writes pass here (the JVM writes to the file descriptor); the runtime's own log handlers
    hold the stream they were made with."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tail = ""

    def write(self, text: str) -> int:
        self._tail = (self._tail + text)[-MAX_SUMMARY:]
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, encoding, isatty: the stream's own
        return getattr(self._stream, name)

    def exit_summary(self, code: object) -> str:
        """The failure of a script that called sys.exit(code): the code, and its last words on stderr."""
        said = " | ".join(line.strip() for line in self._tail.splitlines()[-3:] if line.strip())
        summary = f"the script exited with {code}" + (f"; its last words on stderr: {said}" if said else "")
        return _bounded(summary)


def _bounded(summary: str) -> str:
    return summary if len(summary) <= MAX_SUMMARY else f"{summary[: MAX_SUMMARY - 1]}…"


def _root_cause(text: str) -> str:
    lines = text.splitlines()
    tracebacks = [
        n for n, line in enumerate(lines) if line.strip().endswith("Traceback (most recent call last):")
    ]
    if tracebacks:
        # A traceback's frames are indented; its error is the first line after them that is not.
        for line in lines[tracebacks[-1] + 1 :]:
            if line and not line[0].isspace() and _PYTHON_ERROR.match(line):
                return line.strip()
    causes = [line.strip()[len(_CAUSED_BY) :] for line in lines if line.strip().startswith(_CAUSED_BY)]
    return causes[-1] if causes else ""


@dataclass
class Ending:
    """The first ending wins: a fence-out that stops the queries makes the script return normally, and
    that must not be reported as a clean finish. Once written, the ending is final."""

    reason: str = ""
    code: Exit = Exit.FINISHED
    message: str = ""
    rollbacks: list[str] = field(default_factory=list)
    _written: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def set(self, code: Exit, reason: str, message: str) -> bool:
        """Record the ending unless one is recorded (or written) already; True if this call recorded it."""
        with self._lock:
            if self.reason or self._written:
                return False
            self.code, self.reason, self.message = code, reason, message
            return True

    @property
    def decided(self) -> bool:
        return bool(self.reason)

    def write_once(self, path: Path, last_committed: dict[str, int]) -> None:
        """Write the termination message; later calls do nothing. Several threads end a driver (the
        watchdog, a fence-out, the main thread) and one of them calls os._exit: a second write truncates the
        file before it writes, so an exit in between left the message empty (seen under load)."""
        with self._lock:
            if self._written:
                return
            self._written = True
            _write(path, self, last_committed)


def _write(path: Path, ending: Ending, last_committed: dict[str, int]) -> None:
    words = TerminationMessage(
        reason=ending.reason,
        exit_code=int(ending.code),
        message=ending.message,
        last_committed=last_committed,
        rollbacks=ending.rollbacks,
    )
    text = json.dumps(words.model_dump(by_alias=True), sort_keys=True)
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        overflow = len(text.encode()) - MAX_MESSAGE_BYTES + 3
        shorter = ending.message[: max(0, len(ending.message) - overflow)] + "..."
        text = json.dumps(
            words.model_copy(update={"message": shorter}).model_dump(by_alias=True), sort_keys=True
        )
    try:
        path.write_text(text)
    except OSError as error:
        log.error("cannot write the termination message to %s: %s", path, error)
    log.info("termination message: %s", text)
