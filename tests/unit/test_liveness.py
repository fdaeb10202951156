"""Progress liveness: which query is stuck, the bounds of spec.liveness.progressTimeoutSeconds, and how the
setting reaches the driver; the liveness probe's endpoint, which a frozen process leaves unanswered. The
watchdog against a real JVM stopped by SIGSTOP: e2e/test_soak.py; the probe on real kubelets with a frozen
driver container: tests/realnodes/test_installation.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.liveness import Stuck, shortest_timeout, spark_duration_seconds, stuck
from ftspark.domain.models import JobSpec
from ftspark.manifests import AttemptPlan, driver_pod
from ftspark.protocol import HEALTH_PATH, HEALTH_PORT, PROTOCOL_VERSION, READY_PATH, DriverEnv
from ftspark.runtime.config import RuntimeConfig
from ftspark.runtime.liveness import HealthEndpoint, SignsOfLife, Watchdog

BASE = {"image": "img", "mainApplicationFile": "local:///job.py", "checkpoint": {"storage": "s3://bkt/j"}}
IDLE_KEY = "spark.sql.streaming.noDataProgressEventInterval"


def spec(**changes: object) -> JobSpec:
    return JobSpec.model_validate({**BASE, **changes})


def test_the_query_silent_longest_is_stuck_once_silent_for_the_timeout() -> None:
    seen = {"counts": 100.0, "alerts": 130.0}
    assert stuck(seen, now=129.9, timeout=30) is None
    assert stuck(seen, now=130.0, timeout=30) == Stuck("counts", 30.0)
    assert stuck(seen, now=200.0, timeout=30) == Stuck("counts", 100.0), "the longest silence is named"
    assert stuck(seen, now=10_000.0, timeout=0) is None, "0 turns the check off"
    assert stuck({}, now=10_000.0, timeout=30) is None, "no running query, nothing to be stuck"


def test_every_event_of_a_query_is_a_sign_of_life_until_it_ends() -> None:
    now = [0.0]
    signs = SignsOfLife(clock=lambda: now[0])
    signs.started("id-1", "counts")
    signs.started("id-2", None)
    now[0] = 25.0
    signs.heard("id-1")  # a batch, or Spark's idle event
    now[0] = 40.0
    assert signs.stuck(30) == Stuck("id-2", 40.0), "an unnamed query is named by its id"
    signs.ended("id-2")
    assert signs.stuck(30) is None
    now[0] = 55.0
    assert signs.stuck(30) == Stuck("counts", 30.0)
    signs.ended("id-1")
    signs.heard("id-1")  # a late event of an ended query does not bring it back
    now[0] = 1000.0
    assert signs.stuck(30) is None


def test_the_watchdog_calls_once_when_a_query_is_stuck() -> None:
    now = [0.0]
    signs = SignsOfLife(clock=lambda: now[0])
    signs.started("id-1", "counts")
    calls: list[Stuck] = []
    called = threading.Event()

    def on_stuck(found: Stuck) -> None:
        calls.append(found)
        called.set()

    watchdog = Watchdog(signs, 30, on_stuck)
    watchdog.start()
    now[0] = 29.0
    assert not called.wait(1.5), "not before the timeout"
    now[0] = 31.0
    assert called.wait(5)
    assert calls == [Stuck("counts", 31.0)]
    watchdog.stop()


def test_spark_durations_read_as_spark_reads_a_milliseconds_setting() -> None:
    assert spark_duration_seconds("10000") == 10.0
    assert spark_duration_seconds("10000ms") == 10.0
    assert spark_duration_seconds("10s") == 10.0
    assert spark_duration_seconds("2min") == spark_duration_seconds("2m") == 120.0
    assert spark_duration_seconds("1h") == 3600.0
    with pytest.raises(ValueError, match="not a duration"):
        spark_duration_seconds("ten seconds")
    assert shortest_timeout({}) == 20.0, "Spark's default idle interval (10 s) plus the margin"
    assert shortest_timeout({IDLE_KEY: "60s"}) == 70.0


def test_the_timeout_defaults_to_five_minutes_and_is_0_or_above_the_idle_interval() -> None:
    assert spec().liveness.progress_timeout_seconds == 300
    assert spec(liveness={"progressTimeoutSeconds": 0}).liveness.progress_timeout_seconds == 0
    assert spec(liveness={"progressTimeoutSeconds": 20}).liveness.progress_timeout_seconds == 20
    with pytest.raises(ValidationError, match=r"spec.liveness.progressTimeoutSeconds \(19\) must be 0"):
        spec(liveness={"progressTimeoutSeconds": 19})
    with pytest.raises(ValidationError, match=r"at least 130"):
        spec(liveness={"progressTimeoutSeconds": 100}, sparkConf={IDLE_KEY: "2min"})
    assert spec(liveness={"progressTimeoutSeconds": 20}, sparkConf={IDLE_KEY: "5s"})
    with pytest.raises(ValidationError, match=rf"spec.sparkConf\[{IDLE_KEY}\]: 'soon' is not a duration"):
        spec(sparkConf={IDLE_KEY: "soon"})
    with pytest.raises(ValidationError, match="less than or equal to 31536000"):
        spec(liveness={"progressTimeoutSeconds": 10**12})
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        spec(liveness={"progressTimeoutSeconds": -1})


def test_the_timeout_reaches_the_driver_runtime() -> None:
    job = spec(liveness={"progressTimeoutSeconds": 45})
    plan = AttemptPlan("ns", "job", "0123456789ab", 1, job, "s3://bkt/j/checkpoints/x", "nothing")
    env = {e["name"]: e.get("value") for e in driver_pod(plan)["spec"]["containers"][0]["env"]}
    assert env[DriverEnv.PROGRESS_TIMEOUT] == "45"
    required: dict[str, str] = {
        DriverEnv.PROTOCOL: str(PROTOCOL_VERSION),
        DriverEnv.JOB: "ns/job",
        DriverEnv.POD_NAME: "job-1-driver",
        DriverEnv.CHECKPOINT_LOCATION: "/c",
        DriverEnv.TERM_FLOOR: "ftspark-system/ftspark-operator-term",
        DriverEnv.CHECKPOINT_KEY_FILE: "/etc/ftspark/checkpoint-key/checkpoint-key",
    }
    runtime = RuntimeConfig.from_env({**required, DriverEnv.PROGRESS_TIMEOUT: "45"})
    assert runtime.progress_timeout == 45.0
    assert RuntimeConfig.from_env(required).progress_timeout == 300.0


def test_a_driver_with_liveness_checks_on_is_probed_over_http_and_one_with_them_off_is_not() -> None:
    def container(timeout: int) -> Any:
        job = spec(liveness={"progressTimeoutSeconds": timeout})
        plan = AttemptPlan("ns", "job", "0123456789ab", 1, job, "s3://bkt/j/checkpoints/x", "nothing")
        return driver_pod(plan)["spec"]["containers"][0]

    probed = container(45)
    probe = probed["livenessProbe"]
    assert probe["httpGet"] == {"path": HEALTH_PATH, "port": HEALTH_PORT}
    assert probe["failureThreshold"] * probe["periodSeconds"] <= 30, "killed within 30-40 s"
    assert {"name": DriverEnv.HEALTH_PORT, "value": str(HEALTH_PORT)} in probed["env"]
    off = container(0)
    assert "livenessProbe" not in off
    assert DriverEnv.HEALTH_PORT not in {e["name"] for e in off["env"]}


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_readiness_path_answers_once_the_session_is_up() -> None:
    ready = threading.Event()
    endpoint = HealthEndpoint("127.0.0.1", 0, ready)
    endpoint.start()
    try:
        base = f"http://127.0.0.1:{endpoint.port}"
        assert _get(base + READY_PATH) == 503
        assert _get(base + HEALTH_PATH) == 200, "alive while not ready"
        ready.set()
        assert _get(base + READY_PATH) == 200
    finally:
        endpoint.stop()


def test_the_health_endpoint_answers_until_its_process_is_frozen() -> None:
    serve = (
        "import sys, time\n"
        "from ftspark.runtime.liveness import HealthEndpoint\n"
        "endpoint = HealthEndpoint('127.0.0.1', 0)\n"
        "endpoint.start()\n"
        "print(endpoint.port, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-c", serve], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        base = f"http://127.0.0.1:{process.stdout.readline().strip()}"
        assert _get(base + HEALTH_PATH) == 200
        assert _get(base + "/other") == 404
        process.send_signal(signal.SIGSTOP)
        with pytest.raises(TimeoutError):
            _get(base + HEALTH_PATH)  # accepted by the kernel, never answered: the probe times out
        process.send_signal(signal.SIGCONT)
        assert _get(base + HEALTH_PATH) == 200
    finally:
        process.kill()
        process.wait()
