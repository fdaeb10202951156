"""The control-plane fixture leaves nothing behind: not after a failing test, not after a killed test run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.processes import REPO_ROOT
from tests.waiting import eventually

_INNER_TEST = textwrap.dedent(
    """
    import json, os, time
    from pathlib import Path

    def test_records_and_fails(control_plane):
        names = ("etcd", "kube-apiserver")
        pids = [control_plane.process(name).pid for name in names]
        record = {"workdir": str(control_plane.workdir), "pids": pids}
        Path(os.environ["RECORD"]).write_text(json.dumps(record))
        if os.environ.get("HANG"):
            time.sleep(600)
        assert False, "this inner test fails on purpose"
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it no longer runs.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def _start_inner_run(tmp_path: Path, *, hang: bool) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "test_inner.py").write_text(_INNER_TEST)
    record = tmp_path / "record.json"
    env = {
        **os.environ,
        "RECORD": str(record),
        "PYTHONPATH": os.pathsep.join(str(REPO_ROOT / p) for p in ("", "operator", "tools")),
    }
    if hang:
        env["HANG"] = "1"
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-p", "no:cacheprovider", tmp_path],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return inner, record


def test_failing_test_still_stops_processes_and_removes_workdir(tmp_path: Path) -> None:
    inner, record_path = _start_inner_run(tmp_path, hang=False)
    output, _ = inner.communicate(timeout=300)
    assert inner.returncode == 1, output
    assert "this inner test fails on purpose" in output
    record = json.loads(record_path.read_text())
    assert not Path(record["workdir"]).exists()
    assert not [pid for pid in record["pids"] if _alive(pid)]


def test_killed_test_run_takes_its_control_plane_with_it(tmp_path: Path) -> None:
    inner, record_path = _start_inner_run(tmp_path, hang=True)
    try:
        # As long as the inner run's own start may take (etcd's and the API server's start-up timeouts, on a
        # busy machine); an inner run that ended without its record says why.
        eventually(
            lambda: record_path.exists() or inner.poll() is not None,
            timeout=300,
            what="inner run started its control plane",
        )
        # Read, not communicate(): the finally below still communicates, which a closed pipe would fail.
        assert inner.stdout is not None
        assert record_path.exists(), f"the inner run ended first:\n{inner.stdout.read()}"
        record = json.loads(eventually(record_path.read_text, timeout=10, what="record written"))
        assert all(_alive(pid) for pid in record["pids"])
        inner.send_signal(signal.SIGKILL)
        inner.wait(30)
        eventually(lambda: not any(_alive(pid) for pid in record["pids"]), timeout=30, what="children gone")
        # What a SIGKILLed run could not remove, the next control plane sweeps away.
        ControlPlane(bin_dir=Path("/nonexistent")).stop()
        assert not Path(record["workdir"]).exists()
    finally:
        inner.kill()
        inner.communicate()
