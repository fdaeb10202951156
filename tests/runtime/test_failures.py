"""Fencing and bad input: a driver that loses its Lease or is fenced out of the checkpoint store stops its
queries and exits non-zero; a failing script, a missing main file or an unreachable S3 end with a clear
termination message, never a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ftspark.adapters.k8s.lease_lock import format_micro_time
from ftspark.domain.fencing import Epoch
from ftspark.protocol import NO_PROGRESS, DriverEnv, Exit, RuntimeEnv, driver_lease_name
from ftspark_dev.subjects.windowed_counts import write_input
from tests.runtime.conftest import OPERATOR, SHORT_LEASE, RuntimeJob


def _running(job: RuntimeJob) -> None:
    write_input(job.input, 2)
    job.start()
    job.wait_for_output(2, timeout=120)


def _parent_if_alive(pid: int) -> int | None:
    """The parent of a live process; None when it is gone or a zombie."""
    try:
        state, parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
    except OSError:
        return None
    return None if state == "Z" else int(parent)


def _descendants(pid: int) -> set[int]:
    """Every live process below pid (the JVM pyspark started, and anything it started)."""
    parents = {int(p.name): _parent_if_alive(int(p.name)) for p in Path("/proc").glob("[0-9]*")}
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    return _parent_if_alive(pid) is not None


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "(gone)"


def _take_over(leases: client.CoordinationV1Api, job: RuntimeJob) -> float:
    """Another holder takes the driver's Lease (retrying when the driver renewed in between): when."""
    for _ in range(20):
        lease = leases.read_namespaced_lease(driver_lease_name(job.name), job.namespace)
        assert lease.spec.holder_identity == f"{job.pod}@{job.attempt}"
        body = {
            "metadata": {"name": lease.metadata.name, "resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": "intruder",
                "leaseDurationSeconds": 60,
                "renewTime": format_micro_time(datetime.now(UTC)),
                "leaseTransitions": (lease.spec.lease_transitions or 0) + 1,
            },
        }
        try:
            leases.replace_namespaced_lease(lease.metadata.name, job.namespace, body)
        except client.ApiException as error:
            if error.status == 409:
                continue
            raise
        return time.monotonic()
    raise AssertionError("the driver's Lease could not be taken over")


@pytest.mark.slow
def test_lease_taken_over_stops_the_queries_within_the_renew_deadline(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    _running(job)
    assert job.process is not None
    jvm = _descendants(job.process.pid)
    assert jvm, "the driver runs its JVM as a child process"
    write_input(job.input, 4, first_file=2)  # batches are running when the Lease goes
    job.wait_for_new_batch(sum(job.output.runs().values()))
    taken = _take_over(client.CoordinationV1Api(job.api), job)
    code = job.wait(30)
    gone = time.monotonic() - taken
    message = job.termination()
    print(f"\nlease lost: driver and JVM gone {gone:.1f} s after the takeover: {message}")
    assert code == Exit.FENCED_OUT and message["reason"] == "LeaseLost"
    # The takeover came after the driver's last renewal. It learns of the loss at its next renew, at the
    # latest at its renew deadline (2 s) after that renewal (the elector, or its watchdog when a call hangs);
    # its queries then get half the margin to the lease duration (0.5 s) before the JVM is killed. That is
    # the driver's bound, from the timers the test sets; a whole lease duration more is slack for a loaded
    # machine (how fast it really goes is printed above). A driver that waited for its script's own grace
    # (10 s) instead, or only for its queries, would miss it.
    lease = float(SHORT_LEASE[RuntimeEnv.LEASE_DURATION])
    deadline = float(SHORT_LEASE[RuntimeEnv.LEASE_RENEW_DEADLINE])
    assert gone <= deadline + (lease - deadline) / 2 + lease, f"gone {gone:.1f} s after the takeover"
    survivors = {pid: _command(pid) for pid in jvm if _alive(pid)}
    assert not survivors, f"the driver exited before its JVM was gone: {survivors}"


@pytest.mark.slow
def test_sigterm_ends_a_driver_that_is_pid_1_at_once_its_jvm_first(make_job: Any) -> None:
    """As in its container: the driver is PID 1 of a PID namespace of its own, where a signal it has no
    handler for is ignored (the kubelet's SIGTERM at a pod's deletion then waited out the grace period)."""
    job: RuntimeJob = make_job()
    write_input(job.input, 2)
    job.start(prefix=("unshare", "--pid", "--fork", "--kill-child"))
    job.wait_for_output(2, timeout=120)
    assert job.process is not None
    (driver,) = [pid for pid in _descendants(job.process.pid) if _parent_if_alive(pid) == job.process.pid]
    status = Path(f"/proc/{driver}/status").read_text().splitlines()
    (ids,) = [line for line in status if line.startswith("NSpid")]
    assert ids.split()[-1] == "1", f"PID 1 of its namespace: {ids}"
    jvm = _descendants(driver)
    assert jvm, "the driver runs its JVM as a child process"
    signalled = time.monotonic()
    os.kill(driver, signal.SIGTERM)
    code = job.wait(15)
    gone = time.monotonic() - signalled
    message = job.termination()
    print(f"\nSIGTERM: the driver and its JVM gone {gone:.1f} s after it: {message}")
    assert code == Exit.TERMINATED and message["reason"] == "DriverKilled", (code, message)
    survivors = {pid: _command(pid) for pid in jvm if _alive(pid)}
    assert not survivors, f"the driver exited before its JVM was gone: {survivors}"


PROGRESS_TIMEOUT = 20  # spec.liveness.progressTimeoutSeconds' least


@pytest.mark.slow
def test_a_driver_whose_predecessor_left_its_lease_starts_its_session_while_it_waits_it_out(
    make_job: Any,
) -> None:
    """After a node loss nobody releases the lost driver's Lease, and the next driver must wait it out, a
    lease duration (15 s) from its first read. It reads it from the start of its session, which starts in
    the meantime, and goes on exactly once."""
    job: RuntimeJob = make_job()
    job.short_lease = False  # the lease duration users get: longer than a session's start
    write_input(job.input, 2)
    first = job.start()
    job.wait_for_output(2, timeout=180)
    os.killpg(first.pid, signal.SIGKILL)  # its node lost: no operator releases its Lease
    first.wait(30)
    started = time.monotonic()
    job.start()
    write_input(job.input, 2, first_file=2)
    job.wait_for_output(4, timeout=180)
    log = job.log(1000)
    session = re.search(r"spark session ready in ([0-9.]+) s", log)
    taken = re.search(r"holding lease \S+ \(taken over ([0-9.]+) s after", log)
    assert session and taken, log
    assert log.index(session[0]) < log.index(taken[0]), "the session started while the Lease was waited out"
    print(
        f"\nsession up in {session[1]} s, the Lease taken {taken[1]} s after its last renew; "
        f"output complete {time.monotonic() - started:.1f} s after the start"
    )
    assert float(taken[1]) >= 15, "the lost driver's Lease was waited out, not taken early"


@pytest.mark.slow
def test_a_stopped_jvm_ends_the_driver_as_hung_after_the_progress_timeout(make_job: Any) -> None:
    """The driver's JVM stops (SIGSTOP) while input keeps arriving, its Python runtime not: Kubernetes would
    still see the pod running. The runtime's watchdog ends the driver once its query has been silent for the
    progress timeout (NoProgress, naming the query and the timeout), and the JVM goes with it. What the
    operator makes of that ending (a restart, lastFailure and Degraded NoProgress, an Event) is
    tests/unit/test_reconciler.py's."""
    job: RuntimeJob = make_job()
    job.env[DriverEnv.PROGRESS_TIMEOUT] = str(PROGRESS_TIMEOUT)
    _running(job)
    assert job.process is not None
    jvms = [
        pid
        for pid in _descendants(job.process.pid)
        if Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    ]
    assert jvms, "the driver runs its JVM as a child process"
    for pid in jvms:
        os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    write_input(job.input, 2, first_file=2)  # input that no batch will take
    code = job.wait(PROGRESS_TIMEOUT + 60)
    took = time.monotonic() - stopped
    message = job.termination()
    print(f"\nJVM stopped: the driver ended {took:.1f} s later: {message}")
    assert (code, message["reason"]) == (Exit.NO_PROGRESS, NO_PROGRESS), message
    assert f"the progress timeout is {PROGRESS_TIMEOUT} s" in message["message"], message
    survivors = {pid: _command(pid) for pid in jvms if _alive(pid)}
    assert not survivors, f"the driver exited before its JVM was gone: {survivors}"


@pytest.mark.slow
def test_newer_attempt_fences_the_running_driver_out(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    _running(job)
    # The operator starts attempt 2 (e.g. it believes attempt 1 is gone): the fence moves first.
    job.stores().checkpoints.advance_fence(job.key, Epoch("driver", job.attempt + 1, "next"), OPERATOR)
    write_input(job.input, 1, first_file=2)  # the next committed batch's pointer is refused
    code = job.wait(60)
    message = job.termination()
    assert code == Exit.FENCED_OUT and message["reason"] == "FencedOut", message
    assert all(p.attempt == 1 for p in job.stores().checkpoints.pointers(job.key))


def test_a_setting_the_spark_jvm_refuses_ends_the_driver_as_spark_not_started(make_job: Any) -> None:
    """The JVM says why on its stderr (the driver's log), then exits; the runtime says where to read it.
    (A script's own exit, sys.exit(2) after printing why: the real-node table of causes.)"""
    job: RuntimeJob = make_job()
    job.extra_conf = {"spark.executor.instances": "-1"}
    job.start()
    assert job.wait(60) == Exit.BAD_INPUT
    message = job.termination()
    assert message["reason"] == "SparkNotStarted", message
    assert "ftspark logs JOB --attempt N" in message["message"]
    assert "Number of executors must be a positive number" in job.log(), "the JVM's own words, in the log"


def test_missing_main_file_is_named(make_job: Any, tmp_path: Path) -> None:
    job: RuntimeJob = make_job()
    job.script = tmp_path / "nowhere.py"
    started = time.monotonic()
    job.start()
    assert job.wait(60) == Exit.BAD_INPUT
    message = job.termination()
    assert message["reason"] == "MainFileMissing" and str(job.script) in message["message"]
    assert time.monotonic() - started < 30


def test_unreachable_s3_is_reported_not_waited_for(make_job: Any) -> None:
    job: RuntimeJob = make_job()
    unreachable = {**job.spark_conf(), "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:1"}  # no listener
    job.env["FTSPARK_SPARK_CONF"] = json.dumps(unreachable)
    started = time.monotonic()
    job.start()
    assert job.wait(60) == Exit.BAD_INPUT
    message = job.termination()
    elapsed = time.monotonic() - started
    print(f"\nunreachable S3: reported in {elapsed:.1f} s: {message['message']}")
    assert message["reason"] == "StorageUnavailable" and "127.0.0.1:1" in message["message"]
