"""How a driver ends: the exit code and the termination message Kubernetes keeps in the pod's status
(terminationMessagePath, at most 4096 bytes), which the operator reads.

The message is JSON: {"reason", "exitCode", "message", "lastCommitted": {query: batch}, "rollbacks": [...]}.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ftspark.protocol import Exit, TerminationMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4096


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
