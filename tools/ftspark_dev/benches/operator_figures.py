"""`make bench`: the operator's figures on the local control plane (2 cores), printed as a table.

1. 1,000 FaultTolerantSparkJobs created at once: time until every driver pod exists; the operator's CPU
   (cores, averaged over that time) and peak RSS; and, in that burst, how soon the failures of the first
   jobs' drivers are answered (they must not wait behind the jobs still without a pod).
2. Leader SIGKILL: time until the standby has acted (created the driver pod of a job made after the kill),
   with the default Lease timings (15 s / 10 s / 2 s).
3. Driver failure: time from the failed driver's status to the next attempt's pod, beyond the restart delay.
4. API calls the operator makes per job: submitted, when its driver runs, and while it runs idle.
5. Checkpointing jobs: their drivers report a checkpoint every few seconds (the same store writes as a real
   driver's); what the status refreshes they cause cost, and how far the statuses trail the store.
6. With --curve: the burst again at other job counts, each on a fresh installation, as one table: how time,
   API calls per job, CPU and memory grow with the number of jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.configmap_stores import configmap_stores
from ftspark.adapters.s3.stores import S3BlobStore
from ftspark.domain.ha import JobKey
from ftspark.protocol import ROLE_LABEL
from ftspark.reconcile.pacing import CHECKPOINT_REFRESHES_PER_SECOND, CHECKPOINT_STATUS_DELAY
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import (
    OperatorFleet,
    job_manifest,
    report_checkpoint,
    set_driver_exited,
    set_driver_running,
)
from ftspark_dev.cluster.processes import REPO_ROOT, cpu_seconds, memory_mib
from ftspark_dev.cluster.s3server import S3Server
from ftspark_dev.generate.bundle import BUNDLE, NAMESPACE, SERVICE_ACCOUNT

_RESTART_DELAY = 1.0  # job_manifest's fixed delay
_SHIPPED_ACCESS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",  # in the operator's namespace: the record key's
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
_BURST_FAILURES = 3
_SETTLE = 10.0  # seconds for the reconciles a burst of events started to end
_IDLE_WINDOW = 60.0
_CHECKPOINT_PERIOD = 10.0  # every checkpointing job's driver reports this often (a 10 s trigger)


def _driver_pods(core: client.CoreV1Api, namespace: str, **options: Any) -> Any:
    # Raw JSON: deserializing a thousand V1Pod models would make the benchmark its own bottleneck.
    return core.list_namespaced_pod(
        namespace, label_selector=f"{ROLE_LABEL}=driver", _preload_content=False, **options
    )


def _driver_pod_names(core: client.CoreV1Api, namespace: str) -> tuple[set[str], str]:
    """The names of the driver pods and the resourceVersion of the listing."""
    listed = json.loads(_driver_pods(core, namespace).data)
    return {item["metadata"]["name"] for item in listed["items"]}, listed["metadata"]["resourceVersion"]


class _DriverPodCount:
    """How many driver pods the namespace holds, kept by a watch. Listing them every half second instead
    loaded the API server (and this process) more than the operator under test: at 5,000 jobs each listing
    is some 35 MB of JSON."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self._core, self._namespace = core, namespace
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._follow, name="driver-pod-watch", daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        with self._lock:
            return len(self._names)

    def close(self) -> None:
        self._closed.set()
        if self._response is not None:
            # shutdown(), not close(): close() waits for the watch's read in the other thread, up to the
            # watch's own timeout (a minute of every burst); shutdown() ends that read at once.
            self._response.shutdown()
        self._thread.join(timeout=10)

    def _follow(self) -> None:
        try:
            while not self._closed.is_set():
                names, listed_at = _driver_pod_names(self._core, self._namespace)
                with self._lock:
                    self._names = names
                version: str | None = listed_at
                while version is not None and not self._closed.is_set():
                    version = self._watch(version)
        except Exception:
            if not self._closed.is_set():  # closing ends the watch with an error: that one is expected
                raise

    def _watch(self, version: str) -> str | None:
        """Follows from version until the watch times out (returns where it got to) or expires (None: list
        again)."""
        self._response = _driver_pods(
            self._core, self._namespace, watch=True, resource_version=version, timeout_seconds=60
        )
        for line in iter_resp_lines(self._response):
            event = json.loads(line)
            if event["type"] == "ERROR":
                return None
            metadata = event["object"]["metadata"]
            with self._lock:
                if event["type"] == "DELETED":
                    self._names.discard(metadata["name"])
                else:
                    self._names.add(metadata["name"])
            version = metadata["resourceVersion"]
        return version


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
    tally: Tally[tuple[str, str]] = Tally()
    for labels, value in fleet.counters(identity, "ftspark_api_requests"):
        tally[labels["verb"], labels["resource"]] += value
    return tally


def _reads(calls: Tally[tuple[str, str]]) -> int:
    return sum(n for (verb, _), n in calls.items() if verb in ("get", "list"))


def _per_job(calls: Tally[tuple[str, str]], jobs: int, minutes: float = 1.0) -> str:
    """Calls per job (per minute, when measured over minutes), reads and writes, and the three commonest."""
    per = jobs * minutes
    commonest = ", ".join(f"{verb} {resource} {n / per:.1f}" for (verb, resource), n in calls.most_common(3))
    return f"{calls.total() / per:.1f} ({_reads(calls) / per:.1f} reads; {commonest})"


@dataclass(frozen=True)
class Burst:
    """count jobs created at once, on a fresh installation."""

    count: int
    created: float  # seconds, client side
    all_pods: float  # seconds until every job has a driver pod
    failures_answered: list[float]  # seconds beyond the restart delay, for failures made during the burst
    pods_left: int  # jobs still without a pod once those failures were answered
    cores: float  # the operator's, averaged over all_pods
    rss_mib: float  # the operator's peak
    calls: Tally[tuple[str, str]]  # the operator's API requests, until the status writes after the last pod

    def rows(self) -> list[Row]:
        return [
            (f"{self.count} jobs created (client side)", f"{self.created:.1f} s", ""),
            (
                f"driver failure during the burst -> new pod, max of {len(self.failures_answered)}",
                f"{max(self.failures_answered):.2f} s",
                f"<= 2 s (then {self.pods_left} jobs still without a pod)",
            ),
            (f"{self.count} jobs -> all driver pods", f"{self.all_pods:.1f} s", "<= 60 s"),
            ("operator CPU during that", f"{self.cores:.2f} cores", "<= 1 core"),
            ("operator peak RSS", f"{self.rss_mib:.0f} MiB", "<= 300 MiB"),
            ("API calls per submitted job", _per_job(self.calls, self.count), ""),
        ]


def burst(bench: Installation, count: int) -> Burst:
    objects, core, ns = client.CustomObjectsApi(bench.api), client.CoreV1Api(bench.api), bench.namespace
    pid = bench.fleet.replicas[bench.leader].pid
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    calls_before = _api_requests(bench.fleet, bench.leader)

    def create(index: int) -> None:
        body = job_manifest(f"job-{index:04d}", bench.bucket)
        objects.create_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL, body)

    pods = _DriverPodCount(core, ns)
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(create, range(count)))
        created = time.monotonic() - started
        # While most jobs still wait for their first pod: the failures must not wait behind them.
        answers = [_answer_failure(core, ns, f"job-{index:04d}") for index in range(_BURST_FAILURES)]
        pods_left = count - len(pods)
        _wait(lambda: len(pods) >= count, 1200, interval=0.1)
        all_pods = time.monotonic() - started
    finally:
        pods.close()
    cores = (cpu_seconds(pid) - cpu_before) / all_pods
    time.sleep(_SETTLE)  # the last pods' events: their jobs' status writes
    calls = _api_requests(bench.fleet, bench.leader) - calls_before
    return Burst(count, created, all_pods, answers, pods_left, cores, memory_mib(pid, "VmHWM"), calls)


def _running(bench: Installation, count: int) -> list[Row]:
    """Every driver reported Running at once: what a job start costs, then what an idle running job costs."""
    core, ns = client.CoreV1Api(bench.api), bench.namespace
    before = _api_requests(bench.fleet, bench.leader)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda pod: set_driver_running(core, ns, pod), sorted(_driver_pod_names(core, ns)[0])))
    time.sleep(_SETTLE)
    started = _api_requests(bench.fleet, bench.leader)
    time.sleep(_IDLE_WINDOW)
    idle = _api_requests(bench.fleet, bench.leader) - started
    return [
        ("API calls per job when its driver runs", _per_job(started - before, count), ""),
        (f"API calls per running job in {_IDLE_WINDOW:.0f} s idle", _per_job(idle, count), ""),
    ]


@dataclass(frozen=True)
class Checkpointing:
    """count running jobs whose drivers reported a checkpoint every period for minutes."""

    count: int
    period: float
    minutes: float
    refreshes_per_second: float  # the operator's budget
    calls: Tally[tuple[str, str]]  # the operator's API requests meanwhile
    ages: list[float]  # of the checkpoint each status showed at the end, ascending
    new_job_pod: float  # seconds from a job created halfway through to its driver pod

    def bound(self) -> float:
        """The oldest a status may show: the store's newest (at most a period old), refreshed that late."""
        return max(CHECKPOINT_STATUS_DELAY, self.count / self.refreshes_per_second) + self.period

    def rows(self) -> list[Row]:
        what = f"{self.count} jobs checkpointing every {self.period:.0f} s"
        return [
            (f"{what}: API calls per job per minute", _per_job(self.calls, self.count, self.minutes), ""),
            ("  the operator's API requests per second", f"{self.calls.total() / self.minutes / 60:.0f}", ""),
            (
                "  their status's latest checkpoint, age p50 / max",
                f"{statistics.median(self.ages):.1f} / {self.ages[-1]:.1f} s",
                f"<= {self.bound():.0f} s",
            ),
            ("  a job created meanwhile -> its driver pod", f"{self.new_job_pod:.2f} s", ""),
        ]


def checkpointing(bench: Installation, count: int, window: float = _IDLE_WINDOW) -> Checkpointing:
    """The last `count` jobs' running drivers report a checkpoint every _CHECKPOINT_PERIOD for the window,
    with the store writes a real driver makes."""
    objects, ns = client.CustomObjectsApi(bench.api), bench.namespace
    stores = configmap_stores(
        bench.api,
        S3BlobStore(bench.fleet.s3.client()),
        bench.fleet.seal(bench.api),
        results_namespace=bench.fleet.namespace,
    )
    attempts = {
        job["metadata"]["name"]: job["status"]["attempt"]
        for job in objects.list_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL)["items"]
    }
    locations, batches = {}, {}
    for name in sorted(attempts)[-count:]:
        graph = stores.job_graphs.get(JobKey(namespace=ns, name=name))
        assert graph is not None and graph.checkpoint_location, f"{name} has no checkpoint location"
        locations[JobKey(namespace=ns, name=name)] = graph.checkpoint_location
        batches[JobKey(namespace=ns, name=name)] = 0

    def report(job: JobKey) -> None:
        batches[job] += 1
        report_checkpoint(stores.checkpoints, job, locations[job], batches[job], attempt=attempts[job.name])

    def submit() -> float:
        """A new job: its pass must not wait behind the refreshes the reports ask for."""
        objects.create_namespaced_custom_object(
            API_GROUP, API_VERSION, ns, PLURAL, job_manifest("amid-reports", bench.bucket)
        )
        return _wait(partial(_has_driver, client.CoreV1Api(bench.api), ns, "amid-reports-1-driver"), 300)

    rounds = int(window / _CHECKPOINT_PERIOD)
    before, started = _api_requests(bench.fleet, bench.leader), time.monotonic()
    with ThreadPoolExecutor(8) as pool, ThreadPoolExecutor(1) as submitter:
        for round_ in range(rounds):
            list(pool.map(report, locations))
            if round_ == rounds // 2:
                new_job = submitter.submit(submit)
            time.sleep(max(0.0, started + (round_ + 1) * _CHECKPOINT_PERIOD - time.monotonic()))
    calls = _api_requests(bench.fleet, bench.leader) - before
    minutes, now = (time.monotonic() - started) / 60, time.time()
    ages = sorted(
        now - datetime.fromisoformat(job["status"]["latestCheckpoint"]["time"]).timestamp()
        if "latestCheckpoint" in job["status"]
        else float("inf")
        for job in objects.list_namespaced_custom_object(API_GROUP, API_VERSION, ns, PLURAL)["items"]
        if JobKey(namespace=ns, name=job["metadata"]["name"]) in locations
    )
    budget = bench.fleet.checkpoint_refreshes_per_second
    return Checkpointing(count, _CHECKPOINT_PERIOD, minutes, budget, calls, ages, new_job.result())


def _answer_failure(core: client.CoreV1Api, namespace: str, job: str) -> float:
    """Fail the job's first driver (once it exists); seconds until its next pod, beyond the restart delay."""
    _wait(partial(_has_driver, core, namespace, f"{job}-1-driver"), 600, 0.1)
    set_driver_exited(core, namespace, f"{job}-1-driver", 1, "bench failure")
    return _wait(partial(_has_driver, core, namespace, f"{job}-2-driver"), 600) - _RESTART_DELAY


def _driver_failures(bench: Installation, count: int) -> list[Row]:
    core, ns = client.CoreV1Api(bench.api), bench.namespace
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


def _failover(bench: Installation) -> list[Row]:
    objects, core, ns = client.CustomObjectsApi(bench.api), client.CoreV1Api(bench.api), bench.namespace
    standby = bench.fleet.start("bench-standby")
    time.sleep(5)
    killed = time.monotonic()
    bench.fleet.replicas[bench.leader].kill()
    objects.create_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, job_manifest("after-kill", bench.bucket)
    )
    _wait(partial(_has_driver, core, ns, "after-kill-1-driver"), 120, 0.1)
    takeover = time.monotonic() - killed
    if bench.fleet.leader(bench.api) != standby:
        raise RuntimeError("the standby did not take the Lease")
    bound = "Lease taken <= 23.8 s (15 s + 2 x 4.4 s), then its first reconcile"
    return [("leader SIGKILL -> standby acted", f"{takeover:.1f} s", bound)]


@dataclass(frozen=True)
class Installation:
    fleet: OperatorFleet
    api: client.ApiClient
    bucket: str
    leader: str

    @property
    def namespace(self) -> str:
        return self.fleet.watch_namespace


@contextlib.contextmanager
def installation(
    checkpoint_refreshes_per_second: float = CHECKPOINT_REFRESHES_PER_SECOND,
) -> Iterator[Installation]:
    """A fresh control plane and S3, the CRD, and one operator replica leading, with a user's defaults."""
    with ControlPlane() as plane, S3Server() as s3:
        plane.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{API_GROUP}")
        api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        operator_ns, jobs_ns, bucket = NAMESPACE, "bench", f"bench-{uuid.uuid4().hex[:6]}"
        for name in (operator_ns, jobs_ns):
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
            )
        s3.client().create_bucket(Bucket=bucket)
        # The operator as shipped: its ServiceAccount (a token, as in a pod), its RBAC and the admission
        # policies every request of it and every job passes through.
        shipped = [d for d in yaml.safe_load_all(BUNDLE.read_text()) if d and d["kind"] in _SHIPPED_ACCESS]
        plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(shipped))
        log_dir = Path(tempfile.mkdtemp(prefix="ftspark-bench-"))
        # The defaults a user gets: Lease 15 s, renew deadline 10 s, retry 2 s, 16 workers.
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
            checkpoint_refreshes_per_second=checkpoint_refreshes_per_second,
            kubeconfig=plane.kubeconfig_for_service_account(operator_ns, SERVICE_ACCOUNT),
        )
        try:
            leader = fleet.start("bench-leader")
            _wait(lambda: fleet.leader(api) == leader, 60)
            yield Installation(fleet, api, bucket, leader)
        finally:
            fleet.stop_all()
            shutil.rmtree(log_dir, ignore_errors=True)  # the replicas' logs: fleet.logs() while it runs


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    print()
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument(
        "--checkpointing", type=int, default=1000, help="jobs whose drivers report checkpoints (of --jobs)"
    )
    parser.add_argument(
        "--checkpoint-refreshes-per-second",
        type=float,
        default=CHECKPOINT_REFRESHES_PER_SECOND,
        help="the operator's setting (a large one: every job refreshed 5 s after its report, unpaced)",
    )
    parser.add_argument(
        "--curve",
        default="",
        help="more job counts, comma-separated (e.g. 100,5000): a burst each on a fresh installation, "
        "printed with --jobs' as the scale curve",
    )
    args = parser.parse_args()
    with installation(args.checkpoint_refreshes_per_second) as bench:
        first = burst(bench, args.jobs)
        rows = first.rows()
        rows += _driver_failures(bench, args.restarts)
        rows += _running(bench, args.jobs)
        rows += checkpointing(bench, args.checkpointing).rows()
        rows += _failover(bench)
    bursts = [first]
    for count in (int(part) for part in args.curve.split(",") if part):
        with installation() as bench:
            bursts.append(burst(bench, count))
    print_table(["measure", "value", "target"], [list(row) for row in rows])
    if len(bursts) > 1:
        print_table(
            ["jobs", "all pods s", "failure answered s", "API calls/job", "reads/job", "cores", "RSS MiB"],
            [
                [
                    str(b.count),
                    f"{b.all_pods:.1f}",
                    f"{max(b.failures_answered):.2f}",
                    f"{b.calls.total() / b.count:.1f}",
                    f"{_reads(b.calls) / b.count:.1f}",
                    f"{b.cores:.2f}",
                    f"{b.rss_mib:.0f}",
                ]
                for b in sorted(bursts, key=lambda b: b.count)
            ],
        )


if __name__ == "__main__":
    main()
