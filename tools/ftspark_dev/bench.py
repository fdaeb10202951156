"""`make bench`: the operator's figures on the local control plane (2 cores), printed as a table.

1. 1,000 FaultTolerantSparkJobs created at once: time until every driver pod exists; the operator's CPU
   (cores, averaged over that time) and peak RSS; and, in that burst, how soon the failures of the first
   jobs' drivers are answered (they must not wait behind the jobs still without a pod).
2. Leader SIGKILL: time until the standby has acted (created the driver pod of a job made after the kill),
   with the default Lease timings (15 s / 10 s / 2 s).
3. Driver failure: time from the failed driver's status to the next attempt's pod, beyond the restart delay.
4. API calls the operator makes per job: submitted, when its driver runs, and while it runs idle.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections import Counter as Tally
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.protocol import ROLE_LABEL
from ftspark_dev.controlplane import REPO_ROOT, ControlPlane
from ftspark_dev.operators import OperatorFleet, job_manifest, set_driver_exited, set_driver_running
from ftspark_dev.s3server import S3Server

_TICKS = 100  # os.sysconf("SC_CLK_TCK") on Linux
_RESTART_DELAY = 1.0  # job_manifest's fixed delay
_BURST_FAILURES = 3
_SETTLE = 10.0  # seconds for the reconciles a burst of events started to end
_IDLE_WINDOW = 60.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def _driver_pods(core: client.CoreV1Api, namespace: str) -> set[str]:
    # Raw JSON: deserializing a thousand V1Pod models would make the benchmark its own bottleneck.
    pods = core.list_namespaced_pod(namespace, label_selector=f"{ROLE_LABEL}=driver", _preload_content=False)
    return {item["metadata"]["name"] for item in json.loads(pods.data)["items"]}


def _has_driver(core: client.CoreV1Api, namespace: str, pod: str) -> bool:
    # One read, not a listing: at thousands of jobs a listing every 50 ms would load the API server itself.
    try:
        core.read_namespaced_pod(pod, namespace, _preload_content=False)
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _wait(probe: Callable[[], bool], timeout: float, interval: float = 0.05) -> float:
    """Seconds until probe() is true."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if probe():
            return time.monotonic() - start
        time.sleep(interval)
    raise TimeoutError(f"not within {timeout} s")


Row = tuple[str, str, str]


def _api_requests(fleet: OperatorFleet, identity: str) -> Tally[tuple[str, str]]:
    """The replica's ftspark_api_requests_total, by (verb, resource)."""
    status, body = fleet.probe(identity, "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics of {identity}: HTTP {status}")
    tally: Tally[tuple[str, str]] = Tally()
    for family in text_string_to_metric_families(body):
        if family.name == "ftspark_api_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    tally[sample.labels["verb"], sample.labels["resource"]] += int(sample.value)
    return tally


def _per_job(calls: Tally[tuple[str, str]], jobs: int) -> str:
    """Calls per job, reads and writes, and the three commonest."""
    reads = sum(n for (verb, _), n in calls.items() if verb in ("get", "list"))
    commonest = ", ".join(f"{verb} {resource} {n / jobs:.1f}" for (verb, resource), n in calls.most_common(3))
    return f"{calls.total() / jobs:.1f} ({reads / jobs:.1f} reads; {commonest})"


def _many_jobs(
    fleet: OperatorFleet, api: client.ApiClient, bucket: str, count: int, leader: str
) -> list[Row]:
    objects, core, ns = client.CustomObjectsApi(api), client.CoreV1Api(api), fleet.watch_namespace
    pid = fleet.replicas[leader].pid
    cpu_before, started, calls_before = _cpu_seconds(pid), time.monotonic(), _api_requests(fleet, leader)

    def create(index: int) -> None:
        body = job_manifest(f"job-{index:04d}", bucket)
        objects.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(count)))
    created = time.monotonic() - started
    # While most jobs still wait for their first pod: the failures must not wait behind them.
    answers = [_answer_failure(core, ns, f"job-{index:04d}") for index in range(_BURST_FAILURES)]
    pods_left = count - len(_driver_pods(core, ns))
    _wait(lambda: len(_driver_pods(core, ns)) >= count, 1200, interval=0.5)
    elapsed = time.monotonic() - started
    cores = (_cpu_seconds(pid) - cpu_before) / elapsed
    time.sleep(_SETTLE)  # the last pods' events: their jobs' status writes
    submitted = _api_requests(fleet, leader) - calls_before
    return [
        (f"{count} jobs created (client side)", f"{created:.1f} s", ""),
        (
            f"driver failure during the burst -> new pod, max of {len(answers)}",
            f"{max(answers):.2f} s",
            f"<= 2 s (then {pods_left} jobs still without a pod)",
        ),
        (f"{count} jobs -> all driver pods", f"{elapsed:.1f} s", "<= 60 s"),
        ("operator CPU during that", f"{cores:.2f} cores", "<= 1 core"),
        ("operator peak RSS", f"{_peak_rss_mib(pid):.0f} MiB", "<= 300 MiB"),
        ("API calls per submitted job", _per_job(submitted, count), ""),
    ]


def _running(fleet: OperatorFleet, api: client.ApiClient, leader: str, count: int) -> list[Row]:
    """Every driver reported Running at once: what a job start costs, then what an idle running job costs."""
    core, ns = client.CoreV1Api(api), fleet.watch_namespace
    before = _api_requests(fleet, leader)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda pod: set_driver_running(core, ns, pod), sorted(_driver_pods(core, ns))))
    time.sleep(_SETTLE)
    started = _api_requests(fleet, leader)
    time.sleep(_IDLE_WINDOW)
    idle = _api_requests(fleet, leader) - started
    return [
        ("API calls per job when its driver runs", _per_job(started - before, count), ""),
        (f"API calls per running job in {_IDLE_WINDOW:.0f} s idle", _per_job(idle, count), ""),
    ]


def _answer_failure(core: client.CoreV1Api, namespace: str, job: str) -> float:
    """Fail the job's first driver (once it exists); seconds until its next pod, beyond the restart delay."""
    _wait(partial(_has_driver, core, namespace, f"{job}-1-driver"), 600, 0.1)
    set_driver_exited(core, namespace, f"{job}-1-driver", 1, "bench failure")
    return _wait(partial(_has_driver, core, namespace, f"{job}-2-driver"), 600) - _RESTART_DELAY


def _driver_failures(fleet: OperatorFleet, api: client.ApiClient, count: int) -> list[Row]:
    core, ns = client.CoreV1Api(api), fleet.watch_namespace
    names = [f"job-{i:04d}" for i in range(_BURST_FAILURES, _BURST_FAILURES + count)]
    for name in names:
        set_driver_running(core, ns, f"{name}-1-driver")
    time.sleep(2)
    samples = []
    for name in names:
        set_driver_exited(core, ns, f"{name}-1-driver", 1, "bench failure")
        samples.append(_wait(partial(_has_driver, core, ns, f"{name}-2-driver"), 60) - _RESTART_DELAY)
    samples.sort()
    return [
        (
            f"driver failure -> new pod beyond the delay, p50 of {count}",
            f"{statistics.median(samples):.2f} s",
            "<= 1 s",
        ),
        ("  p90", f"{samples[int(len(samples) * 0.9) - 1]:.2f} s", ""),
    ]


def _failover(fleet: OperatorFleet, api: client.ApiClient, bucket: str, leader: str) -> list[Row]:
    objects, core, ns = client.CustomObjectsApi(api), client.CoreV1Api(api), fleet.watch_namespace
    standby = fleet.start("bench-standby")
    time.sleep(5)
    killed = time.monotonic()
    fleet.replicas[leader].kill()
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, job_manifest("after-kill", bucket)
    )
    _wait(partial(_has_driver, core, ns, "after-kill-1-driver"), 120, 0.1)
    takeover = time.monotonic() - killed
    if fleet.leader(api) != standby:
        raise RuntimeError("the standby did not take the Lease")
    bound = "Lease taken <= 23.8 s (15 s + 2 x 4.4 s), then its first reconcile"
    return [("leader SIGKILL -> standby acted", f"{takeover:.1f} s", bound)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--restarts", type=int, default=20)
    args = parser.parse_args()
    with ControlPlane() as plane, S3Server() as s3:
        plane.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{API_GROUP}")
        api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        operator_ns, jobs_ns, bucket = "ftspark-system", "bench", f"bench-{uuid.uuid4().hex[:6]}"
        for name in (operator_ns, jobs_ns):
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
            )
        s3.client().create_bucket(Bucket=bucket)
        log_dir = Path(tempfile.mkdtemp(prefix="ftspark-bench-"))
        # The defaults a user gets: Lease 15 s, renew deadline 10 s, retry 2 s, 4 workers.
        fleet = OperatorFleet(
            plane,
            s3,
            operator_ns,
            jobs_ns,
            log_dir,
            lease_duration=15,
            renew_deadline=10.0,
            retry_period=2.0,
            result_sweep_seconds=300.0,
        )
        try:
            leader = fleet.start("bench-leader")
            _wait(lambda: fleet.leader(api) == leader, 60)
            rows = _many_jobs(fleet, api, bucket, args.jobs, leader)
            rows += _driver_failures(fleet, api, args.restarts)
            rows += _running(fleet, api, leader, args.jobs)
            rows += _failover(fleet, api, bucket, leader)
        finally:
            fleet.stop_all()
    width = max(len(row[0]) for row in rows)
    print(f"\n{'measure'.ljust(width)}  {'value':>12}  target")
    for measure, value, target in rows:
        print(f"{measure.ljust(width)}  {value:>12}  {target}")


if __name__ == "__main__":
    main()
