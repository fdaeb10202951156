"""Child processes that cannot outlive the test run that started them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from ssl import SSLContext

# The kernel sends SIGKILL to the child when the thread that started it exits, even when the test run is
# SIGKILLed: no etcd or apiserver is left behind. setpriv (util-linux) sets it before exec, fork-safe.
_DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL", "--")


_TICKS = 100  # os.sysconf("SC_CLK_TCK") on Linux


REPO_ROOT = Path(__file__).resolve().parents[3]


def built_by(script: Path) -> Path:
    """What a cached build script made (it builds on first use, saying so on stderr): its last line."""
    result = subprocess.run([str(script)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(result.stdout.strip().splitlines()[-1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def memory_mib(pid: int, field: str = "VmRSS") -> float:
    """From /proc/<pid>/status: VmRSS (resident now) or VmHWM (its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ManagedProcess:
    """A long-running child process with its output in a log file."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [*_DIE_WITH_PARENT, *self.argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._process.pid

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no output)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace_seconds: float = 10.0) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)  # a paused process could not act on SIGTERM
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def signal(self, signum: signal.Signals) -> None:
        """Send signum to the process group (SIGSTOP/SIGCONT pause and resume it)."""
        if self.running():
            os.killpg(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_until_healthy(
    process: ManagedProcess,
    url: str,
    *,
    timeout: float,
    ssl_context: SSLContext | None = None,
    healthy: Callable[[bytes], bool] = lambda body: True,
) -> None:
    """Poll url until it answers 200, failing early (with the log) if the process exits."""
    deadline = time.monotonic() + timeout
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if not process.running():
            raise RuntimeError(f"{process.name} exited during start-up:\n{process.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=ssl_context) as response:
                body = response.read()
                if response.status == 200 and healthy(body):
                    return
                last_error = f"HTTP {response.status}: {body[:200]!r}"
        except (urllib.error.URLError, OSError) as error:
            last_error = str(error)
        time.sleep(0.2)
    raise TimeoutError(
        f"{process.name} not healthy after {timeout:.0f} s ({last_error}):\n{process.log_tail()}"
    )
