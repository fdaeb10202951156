"""Fixtures for the driver runtime: real PySpark (local master) as a subprocess, checkpoints on the loopback
S3 server through S3A, Leases and the checkpoint store on the real API server. A test plays the operator:
it advances the driver fence before each attempt, as the reconciler does before creating the pod."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.cluster import KubeDrivers
from ftspark.adapters.k8s.configmap_stores import configmap_stores
from ftspark.adapters.s3.stores import S3BlobStore, split_uri
from ftspark.adapters.seal import RecordSeal
from ftspark.domain.fencing import Epoch
from ftspark.domain.ha import JobKey
from ftspark.ports.stores import HaStores
from ftspark.protocol import (
    CONTROL_ANNOTATION,
    PROTOCOL_VERSION,
    ControlAction,
    ControlRequest,
    DriverEnv,
    RuntimeEnv,
    driver_lease_holder,
    driver_pod_name,
    term_floor_name,
)
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest
from ftspark_dev.cluster.s3server import S3Server
from ftspark_dev.subjects.windowed_counts import EXAMPLE, Output, expected_counts
from ftspark_dev.worlds.local_recovery import local_recovery_jar

REPO = Path(__file__).resolve().parents[2]
SHORT_LEASE: dict[str, str] = {
    RuntimeEnv.LEASE_DURATION: "3",
    RuntimeEnv.LEASE_RENEW_DEADLINE: "2",
    RuntimeEnv.LEASE_RETRY_PERIOD: "0.5",
}

OPERATOR = Epoch(scope="operator", term=1, holder="test-operator")
TERM_FLOOR = term_floor_name("test-operator")  # in the job's namespace, holding OPERATOR's term


@pytest.fixture(scope="session")
def s3a_jars() -> Path:
    """The S3A jars, fetched once into the cache by the project's own script (make spark-jars)."""
    done = subprocess.run(
        [str(REPO / "tools" / "spark_jars.sh")], check=True, capture_output=True, text=True, timeout=900
    )
    return Path(done.stdout.strip())


@pytest.fixture(scope="session")
def checkpoint_jar() -> str:
    """ftspark's jar (jvm/local-recovery), built once into the cache by the project's own script."""
    return local_recovery_jar()


@dataclass
class RuntimeJob:
    """One job's driver attempts, run as `python -m ftspark.runtime driver` subprocesses."""

    name: str
    namespace: str
    s3: S3Server
    kubeconfig: Path
    api: client.ApiClient
    jars: Path
    work: Path
    storage: str
    uid: str  # of a FaultTolerantSparkJob of that name that no operator watches: the driver Lease's owner
    script: Path | str = EXAMPLE  # a path, or a URI such as s3://bucket/job.py
    source: Path | None = None  # the input folder, if not the job's own
    # ftspark's jar, as ftspark's image has it: every job writes its checkpoint through the jar's binding.
    checkpoint_jar: str = ""
    env: dict[str, str] = field(default_factory=dict)
    extra_conf: dict[str, str] = field(default_factory=dict)  # the job's own Spark settings, on top
    # The driver Lease at 3 s / 2 s / 0.5 s, so that tests of its bounds take seconds; False: the runtime's
    # own defaults.
    short_lease: bool = True
    attempt: int = 0
    process: subprocess.Popen[bytes] | None = None
    # The installation's record key: the tests read the job's records with it, its drivers get the job's key.
    seal: RecordSeal = field(default_factory=lambda: RecordSeal(RecordSeal.new_key()))

    @property
    def key(self) -> JobKey:
        return JobKey(namespace=self.namespace, name=self.name)

    @property
    def input(self) -> Path:
        return self.source or self.work / "input"

    @property
    def output(self) -> Output:
        return Output(self.work / "output")

    @property
    def checkpoint_root(self) -> str:
        return f"{self.storage}/checkpoints/run-1"

    @property
    def pod(self) -> str:
        return driver_pod_name(self.name, self.attempt)

    def read(self, uri: str) -> bytes:
        bucket, key = split_uri(uri)
        return self.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def write(self, uri: str, data: bytes) -> None:
        bucket, key = split_uri(uri)
        self.s3.client().put_object(Bucket=bucket, Key=key, Body=data)

    def stores(self) -> HaStores:
        return configmap_stores(
            self.api,
            S3BlobStore(self.s3.client()),
            self.seal,
            results_namespace=self.namespace,
            namespaces=(self.namespace,),
        )

    def spark_conf(self) -> dict[str, str]:
        return {
            "spark.master": "local[2]",
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            **self.s3.spark_conf(),
            **self.extra_conf,
        }

    def start(
        self, *, pod: bool = True, standby: bool = False, prefix: tuple[str, ...] = (), **extra_env: str
    ) -> subprocess.Popen[bytes]:
        """The next attempt: fence the previous ones out (as the operator does), create its pod object (the
        runtime reads control requests from it), start the driver. A standby is fenced in only when promoted:
        the attempt before it goes on meanwhile. prefix: the driver's command runs under it (unshare)."""
        self.attempt += 1
        if standby:
            extra_env = {"FTSPARK_STANDBY": "1", **extra_env}
        else:
            self.advance_fence()
        if pod:
            body = {
                "metadata": {"name": self.pod},
                "spec": {"containers": [{"name": "driver", "image": "ftspark/driver"}]},
            }
            client.CoreV1Api(self.api).create_namespaced_pod(self.namespace, body)
        # Python's and the JVM's temporary files in the test's folder: a killed driver's JVM never removes its
        # own (Spark's local dirs, its artifacts folder), and the test kills drivers.
        scratch = self.work / "tmp"
        scratch.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "TMPDIR": str(scratch),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}",
            "KUBECONFIG": str(self.kubeconfig),
            "PYSPARK_PYTHON": sys.executable,
            DriverEnv.PROTOCOL: str(PROTOCOL_VERSION),
            DriverEnv.JOB: f"{self.namespace}/{self.name}",
            DriverEnv.JOB_UID: self.uid,
            DriverEnv.ATTEMPT: str(self.attempt),
            DriverEnv.POD_NAME: self.pod,
            DriverEnv.CHECKPOINT_LOCATION: self.checkpoint_root,
            DriverEnv.STORAGE: self.storage,
            DriverEnv.SPARK_CONF: json.dumps(self.spark_conf()),
            RuntimeEnv.SPARK_JARS_DIR: str(self.jars),
            RuntimeEnv.TERMINATION_LOG: str(self.termination_log),
            **(SHORT_LEASE if self.short_lease else {}),
            RuntimeEnv.CONTROL_INTERVAL: "0.5",
            DriverEnv.TERM_FLOOR: f"{self.namespace}/{TERM_FLOOR}",
            DriverEnv.CHECKPOINT_KEY_FILE: str(self.checkpoint_key_file()),
            DriverEnv.LOCAL_RECOVERY_JAR: self.checkpoint_jar,
            **self.env,
            **extra_env,
        }
        self.termination_log.unlink(missing_ok=True)
        log = (self.work / f"driver-{self.attempt}.log").open("wb")
        self.process = subprocess.Popen(
            [
                *prefix,
                sys.executable,
                "-m",
                "ftspark.runtime",
                "driver",
                str(self.script),
                str(self.input),
                str(self.output.folder),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: a kill takes the JVM along, as a pod kill does
        )
        return self.process

    def checkpoint_key_file(self) -> Path:
        """The job's checkpoint key as the operator gives it to each driver (a file from its Secret)."""
        path = self.work / "checkpoint-key"
        path.write_bytes(self.seal.job_key(str(self.key)))
        return path

    @property
    def termination_log(self) -> Path:
        return self.work / f"termination-{self.attempt}.json"

    def kill(self) -> None:
        """SIGKILL the driver with its JVM (a pod kill), then release its Lease as the operator does once the
        driver's container is reported terminated: the next attempt need not wait it out."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        holder = driver_lease_holder(self.pod, self.attempt)
        KubeDrivers(self.api, self.seal).release_lease(self.key, self.uid, holder)

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"driver attempt {self.attempt} still running after {timeout} s:\n{self.log()}"
            ) from None

    def termination(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.termination_log.read_text())
        return result

    def log(self, lines: int = 60, attempt: int | None = None) -> str:
        text = (self.work / f"driver-{attempt or self.attempt}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def advance_fence(self) -> None:
        self.stores().checkpoints.advance_fence(self.key, Epoch("driver", self.attempt, self.pod), OPERATOR)

    def promote(self, restore_batch: int | None = None) -> None:
        """What the operator does once the active driver ended: the fence first, then the request."""
        self.advance_fence()
        self.request("promote", "" if restore_batch is None else str(restore_batch))

    def request(self, action: ControlAction, argument: str, term: int | None = OPERATOR.term) -> None:
        """A control request as the operator leader of that term writes it (None: the format before terms)."""
        value = str(ControlRequest(action, argument, term))
        body = {"metadata": {"annotations": {CONTROL_ANNOTATION: value}}}
        client.CoreV1Api(self.api).patch_namespaced_pod(self.pod, self.namespace, body)

    def pod_annotations(self) -> dict[str, str]:
        pod = client.CoreV1Api(self.api).read_namespaced_pod(self.pod, self.namespace)
        annotations: dict[str, str] = pod.metadata.annotations or {}
        return annotations

    def wait_for_output(self, files: int, timeout: float, before: dict[str, int] | None = None) -> float:
        """Seconds until the sink holds the counts of `files` input files (on top of the counts `before`
        it, for a job started from a savepoint); fails on a dead driver."""
        started = time.monotonic()
        expected = expected_counts(files)
        while {**(before or {}), **self.output.counts()} != expected:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"driver exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() - started > timeout:
                raise AssertionError(f"no complete output after {timeout} s:\n{self.log()}")
            time.sleep(0.2)
        return time.monotonic() - started

    def wait_for_new_batch(self, runs_before: int, timeout: float = 180) -> float:
        """Seconds until the sink ran more batches than runs_before; fails on a dead driver."""
        started = time.monotonic()
        while sum(self.output.runs().values()) <= runs_before:
            assert self.process is not None and self.process.poll() is None, self.log()
            assert time.monotonic() - started < timeout, self.log()
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()


@pytest.fixture
def make_job(
    crd: None,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    s3_server: S3Server,
    s3a_jars: Path,
    checkpoint_jar: str,
    bucket: str,
    tmp_path: Path,
) -> Iterator[Any]:
    jobs: list[RuntimeJob] = []
    floor = {"metadata": {"name": TERM_FLOOR}, "data": {"term": str(OPERATOR.term)}}
    client.CoreV1Api(api_client).create_namespaced_config_map(namespace, floor)

    def make(name: str = "wc", storage: str | None = None) -> RuntimeJob:
        # A real object, so that the garbage collector keeps what the driver makes it the owner of.
        custom = client.CustomObjectsApi(api_client)
        created = custom.create_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, bucket)
        )
        job = RuntimeJob(
            name=name,
            namespace=namespace,
            s3=s3_server,
            kubeconfig=control_plane.kubeconfig,
            api=api_client,
            jars=s3a_jars,
            checkpoint_jar=checkpoint_jar,
            work=tmp_path / name,
            storage=storage or f"s3://{bucket}/jobs/{name}",
            uid=created["metadata"]["uid"],
        )
        (job.work / "output" / "runs").mkdir(parents=True)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.stop()
