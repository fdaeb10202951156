"""The documented install, as written, on real nodes with the project's images, then the fault tour on real
containers. In order, on one world (starting one costs a minute):
1. docs/quickstart.md run as written on the empty cluster: its S3 server, `helm install`, both examples
   through a driver kill, stop, resume and savepoint, and its removal, after which nothing of ftspark's is
   left;
2. `helm install` of the chart again: two replicas of the operator image, the Lease, probes, PDB; and
   localRecovery's sweeper on every node (in a namespace at Pod Security `privileged`, as the docs ask),
   removing a gone job's directory and keeping a live one's;
3. the table of causes a user makes, each named in the status and an Event;
4. the exactly-once fault tour, the job with a hot standby driver: executor and driver kills (the standby
   takes over), a frozen driver container (the kubelet's liveness probe kills it), operator-leader and node
   kills, stop and resume;
5. the plain-manifest install (deploy/ftspark-operator.yaml) in place of the chart's;
6. the documented uninstall (docs/operations.md), after which nothing of ftspark's is left in the cluster;
and after all of it, a machine left as it was found.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from ftspark.cli import main as cli
from ftspark.domain.models import DRIVER_REQUEST_CORES
from ftspark.domain.remedies import REMEDIES
from ftspark.protocol import JOB_LABEL, SPARK_EXEC_ID_LABEL, UI_PORT, spark_app_id, ui_service_name
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.versions import OTHER_LINE, OWN_IMAGE
from ftspark_dev.generate.bundle import BUNDLE
from ftspark_dev.realnodes import HostState
from ftspark_dev.realnodes.images import INSTALLATION, OPERATOR_IMAGE, OWN_IMAGE_BUILD
from ftspark_dev.scenarios.tour import RealFaultTour
from ftspark_dev.subjects.windowed_counts import (
    RECORDS_PER_FILE,
    Output,
    WindowedCounts,
    expected_counts,
    write_input,
)
from ftspark_dev.worlds.local_recovery import jvm_counters
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, OPERATOR_NAMESPACE
from ftspark_dev.worlds.real_nodes import DEMO_BUCKET, RealWorld, helm_binary, running_real_world
from tests.waiting import eventually


@pytest.fixture(scope="module")
def world(images: dict[str, Path]) -> Iterator[RealWorld]:
    """The tier's one installation. The run, a node kill included, leaves the machine as it found it: links,
    iptables, cgroups, mounts, sysctls and processes compared before it and after its teardown (a failure
    here is an error at the teardown of the module's last test)."""
    before = HostState.read()
    with running_real_world(nodes=3, image_names=(*INSTALLATION, OWN_IMAGE_BUILD)) as running:
        during = HostState.read()
        yield running
    changed = {change.split(":")[0] for change in before.changes(during)}
    assert changed >= {"link added", "cgroup added", "iptables added", "mount added"}, (
        f"the run changed nothing on the machine ({changed}): this check could not fail"
    )
    left = before.changes(HostState.read())
    assert left == [], "the real-node run left this behind:\n" + "\n".join(left)


SWEEPER = "ftspark-operator-local-state-sweeper"
SWEEP_INTERVAL = 5  # seconds
SWEEP_GRACE = 60  # the least the sweeper takes


def sweeper_root(world: RealWorld) -> Path:
    """The sweepers' localRecovery root: in this world's own directory, never the machine's /var/lib/ftspark
    (the nodes are this machine: a hostPath is one of its directories, and all three sweep the same one)."""
    return world.work / "local-state"


@pytest.fixture(scope="module")
def operator_installed(world: RealWorld) -> RealWorld:
    started = time.monotonic()
    result = world.helm_install(
        "localRecovery.enabled=true",
        "localRecovery.sweeper.enabled=true",
        f"localRecovery.sweeper.root={sweeper_root(world)}",
        f"localRecovery.sweeper.intervalSeconds={SWEEP_INTERVAL}",
        f"localRecovery.sweeper.graceSeconds={SWEEP_GRACE}",
        pod_security="privileged",  # the sweeper's hostPath: docs/local-recovery.md
    )
    assert result.returncode == 0, f"helm install failed:\n{result.stderr}\n{result.stdout}"
    print(
        f"\nhelm install --wait: 2 operator replicas and a sweeper per node Ready in "
        f"{time.monotonic() - started:.1f} s"
    )
    return world


def test_the_quickstart_runs_as_written(world: RealWorld, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/quickstart.md's `sh` blocks, in order, in one bash, on a cluster with nothing of ftspark's, with
    only the two substitutions the page names: images imported into each node's containerd in place of
    `kind load`, and the S3 Service's address in place of its DNS name (these pods have no cluster DNS).
    The page's own S3 server (deploy/s3-server.yaml, the image images/s3/Dockerfile builds) on a volume of
    the default StorageClass; so is the example's output (root's directories, as local-path makes them).
    Then: every record counted once through its driver kill, stop, resume and savepoint; the batch report's
    log; executor logs; and after the page's removal, nothing of ftspark's in the cluster."""
    page = (REPO_ROOT / "docs" / "quickstart.md").read_text()
    *blocks, removal = re.findall(r"^```sh\n(.*?)^```$", page, flags=re.MULTILINE | re.DOTALL)
    script = "".join(blocks)
    # As `kind load` does: each node that lacks the image (its manifest's digest) imports it.
    digest = "$(tar -xOf \"$archive\" index.json | grep -o -m 1 'sha256:[0-9a-f]*')"
    imports = f"digest={digest}; " + "; ".join(
        f'{{ ctr --address {node.socket} --namespace k8s.io images ls | grep -q "$digest" || '
        f'ctr --address {node.socket} --namespace k8s.io images import "$archive" >/dev/null; }}'
        for node in world.nodes.members
    )
    cluster_ip = "$(kubectl -n storage get service s3 -o jsonpath='{.spec.clusterIP}')"
    for named, ours in {
        'kind load image-archive "$archive"': imports,
        "S3_ENDPOINT=http://s3.storage:9000": f"S3_ENDPOINT=http://{cluster_ip}:9000",
    }.items():
        assert script.count(named) == 1, f"the page names {named!r} once"
        script = script.replace(named, ours)
    started = time.monotonic()
    with _removed_if_failed(world, removal):
        _quickstart_ran(world, script, capsys)
    _run_shell(world, removal, "the quickstart's removal")
    eventually(
        lambda: not _ftspark_objects(world) and not world.core.list_persistent_volume().items,
        timeout=120,
        what=lambda: f"nothing of ftspark's, no volume left: {_ftspark_objects(world)}",
    )
    print(f"the quickstart and its removal: {time.monotonic() - started:.1f} s")


@contextlib.contextmanager
def _removed_if_failed(world: RealWorld, removal: str) -> Iterator[None]:
    """A failed quickstart still leaves the cluster empty, by the page's own removal (each line tried), so
    that the module's next tests report their own results, not the namespaces it left."""
    try:
        yield
    except BaseException:
        _run_shell(world, removal, "the removal after a failure", strict=False)
        raise


def _quickstart_ran(world: RealWorld, script: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    shown = _run_shell(world, script, "the quickstart")
    assert world.status("windowed-counts")["savepoints"], "the savepoint the page asked for"
    print(f"\nthe quickstart, images to a savepoint and the batch report: {time.monotonic() - started:.1f} s")
    assert "Restarted" in shown and "DriverLost" in shown, "the job's Events after the driver kill"
    assert "2026-11-21 region 0: 142858 orders" in shown, "ftspark logs nightly-report"
    # Through a driver kill, a stop and a resume: every record counted, none twice.
    output = Output(world.claimed_folder("windowed-counts-output") / "output")
    eventually(
        lambda: output.folder.exists() and output.counts() == expected_counts(4),
        timeout=180,
        what=lambda: f"every record counted once; {world.status('windowed-counts')}",
    )
    assert output.folder.parent.stat().st_uid == 0, "a root-owned volume, as a provisioner makes one"
    executors = world.core.list_namespaced_pod(
        JOBS_NAMESPACE, label_selector=f"spark-role=executor,{JOB_LABEL}=windowed-counts"
    ).items
    ids = sorted(p.metadata.labels[SPARK_EXEC_ID_LABEL] for p in executors)
    assert len(ids) == 2
    with capsys.disabled():
        print(capsys.readouterr().out)  # the figures so far: the page's trace
    assert _ftspark(world, "logs", "windowed-counts", "--executor") == 0
    assert re.search(rf"attempt \d+'s executors now: {', '.join(ids)}", capsys.readouterr().out)
    assert _ftspark(world, "logs", "windowed-counts", "--executor", ids[0]) == 0
    assert "CoarseGrainedExecutorBackend" in capsys.readouterr().out, "the executor's own log"
    assert _ftspark_objects(world), "ftspark's objects are there before the removal: this test could fail"


def _run_shell(world: RealWorld, script: str, what: str, *, strict: bool = True) -> str:
    """A documented script in bash, from the repository's root, with the tools the docs name on the PATH
    (kubectl, helm, aws, ftspark), traced with the seconds each command started at. Its stdout; whatever it
    left running (a port-forward) is killed with it. strict: stop at the first failed command and fail the
    test with the cluster's pods and Events (what the user would look at); else run every line."""
    tools = (world.plane.bin_dir, helm_binary().parent, Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([*map(str, tools), os.environ["PATH"]]),
        "KUBECONFIG": str(world.plane.kubeconfig),
    }
    with subprocess.Popen(
        # root's bash drops PS4 from the environment
        ["bash", *(("-xeuo", "pipefail") if strict else ("-x",)), "-c", "PS4='+ ${SECONDS} s: '\n" + script],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as shell:
        try:
            out, err = shell.communicate(timeout=1800)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
    if strict and shell.returncode != 0:
        looked = [
            world.plane.kubectl(*args, check=False).stdout
            for args in (
                ("get", "nodes,pods,pvc,pv", "-A", "-o", "wide"),
                ("get", "events", "-A", "--sort-by=.lastTimestamp"),
            )
        ]
        pytest.fail(
            f"{what} failed ({shell.returncode}):\n{out[-4000:]}\n{err[-8000:]}\n{''.join(looked)[-8000:]}"
        )
    # When each command started (the trace, without the loops' own lines): where the time went.
    print("\n".join(line for line in err.splitlines() if re.match(r"\+ \d+ s: (?!echo|for|seq)", line)))
    return out


def test_helm_install_runs_two_replicas_of_the_operator_image(operator_installed: RealWorld) -> None:
    world = operator_installed
    pods = world.operator_pods()
    assert len(pods) == 2 and all(p.status.phase == "Running" for p in pods)
    assert {p.spec.containers[0].image for p in pods} == {OPERATOR_IMAGE}
    eventually(
        lambda: world.operator_leader() in {p.metadata.name for p in pods}, timeout=60, what="a leader"
    )
    eventually(lambda: world.acting_leaders() == [world.operator_leader()], timeout=30, what="one acting")
    ready = {p.metadata.name: world.probe(p, "/readyz") for p in pods}
    assert all(code == 200 for code, _ in ready.values()), ready
    pdb = client.PolicyV1Api(world.api).read_namespaced_pod_disruption_budget(
        "ftspark-operator", OPERATOR_NAMESPACE
    )
    assert pdb.spec.min_available == 1
    # It counts the two replicas and nothing else (the sweeper's pods are no replicas).
    eventually(
        lambda: client.PolicyV1Api(world.api)
        .read_namespaced_pod_disruption_budget("ftspark-operator", OPERATOR_NAMESPACE)
        .status.expected_pods
        == 2,
        timeout=30,
        what="the PDB's expected pods: the 2 replicas",
    )
    # The image's promise: non-root, read-only root filesystem.
    check = "import os; print(os.getuid()); open('/probe', 'w')"
    ran = world.plane.kubectl(
        "-n", OPERATOR_NAMESPACE, "exec", pods[0].metadata.name, "--", "python", "-c", check, check=False
    )
    assert ran.stdout.split()[0] == "10001" and "Read-only file system" in ran.stderr, ran


def _sweeper_pods(world: RealWorld) -> list[client.V1Pod]:
    selector = "app.kubernetes.io/component=local-state-sweeper"
    return list(world.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=selector).items)


def _sweeps(world: RealWorld, pod: client.V1Pod) -> dict[str, float]:
    """A sweeper's counters from its /metrics: passes by outcome, and directories removed."""
    status, body = world.probe(pod, "/metrics")
    assert status == 200, f"/metrics of {pod.metadata.name}: {status} {body}"
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "ftspark_local_state_sweeps_total":
                counts[sample.labels["outcome"]] = sample.value
            elif sample.name == "ftspark_local_state_dirs_removed_total":
                counts["dirs_removed"] = sample.value
    return counts


def _plant(job_dir: Path, age: float) -> None:
    """A job's directory as an executor (uid 185) leaves it, private to it, untouched for age seconds."""
    copies = job_dir / "state" / "s3a" / "ftspark-demo"
    copies.mkdir(parents=True)
    (copies / "1.zip").write_bytes(b"x" * 4096)
    (job_dir / "blockmgr").mkdir()
    (job_dir / "blockmgr" / "shuffle_0_0_0.data").write_bytes(b"y" * 1024)
    then = time.time() - age
    for here, dirs, files in os.walk(job_dir, topdown=False):
        for name in (*dirs, *files):
            os.chown(Path(here) / name, 185, 185)
            os.utime(Path(here) / name, (then, then))
        Path(here).chmod(0o700)
    os.chown(job_dir, 185, 185)
    os.utime(job_dir, (then, then))


def _assert_locked_down(world: RealWorld, pod: client.V1Pod) -> None:
    """What runc applied, seen from inside a sweeper: root with only DAC_OVERRIDE and FOWNER (bits 1 and 3),
    no new privileges, RuntimeDefault seccomp, a read-only root filesystem, the world's root at its path."""
    check = (
        "import os; print(os.getuid(), os.path.isdir(os.environ['FTSPARK_LOCAL_STATE_ROOT'])); "
        "print(open('/proc/self/status').read()); open('/probe', 'w')"
    )
    ran = world.plane.kubectl(
        "-n", OPERATOR_NAMESPACE, "exec", pod.metadata.name, "--", "python", "-c", check, check=False
    )
    first, *status_lines = ran.stdout.splitlines()
    uid, mounted = first.split()
    proc = dict(line.split(":\t", 1) for line in status_lines if ":\t" in line)
    assert uid == "0" and mounted == "True", ran
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["FTSPARK_LOCAL_STATE_ROOT"] == str(sweeper_root(world)), env
    assert int(proc["CapEff"], 16) == int(proc["CapBnd"], 16) == (1 << 1) | (1 << 3), proc
    assert (proc["NoNewPrivs"], proc["Seccomp"]) == ("1", "2"), proc
    assert "Read-only file system" in ran.stderr, ran


def test_the_local_state_sweeper_on_every_node(
    operator_installed: RealWorld,
) -> None:
    """localRecovery.sweeper on real kubelets: a Ready pod of the operator image on each node, as locked down
    as the chart says; a directory of a job that is gone is removed, one of a live job is kept until the job
    is deleted. The three nodes share this machine's disk, so three sweepers race for the same directory."""
    world = operator_installed
    started = time.monotonic()
    daemonset = client.AppsV1Api(world.api).read_namespaced_daemon_set(SWEEPER, OPERATOR_NAMESPACE)
    assert daemonset.status.desired_number_scheduled == daemonset.status.number_ready == 3, daemonset.status
    pods = _sweeper_pods(world)
    nodes = {n.metadata.name for n in world.core.list_node().items}
    assert sorted(p.spec.node_name for p in pods) == sorted(nodes), "one sweeper on every node"
    assert {p.spec.containers[0].image for p in pods} == {OPERATOR_IMAGE}
    ready_after = []
    for pod in pods:
        (ready,) = [c for c in pod.status.conditions if c.type == "Ready"]
        assert ready.status == "True", pod.status
        ready_after.append((ready.last_transition_time - pod.metadata.creation_timestamp).total_seconds())
    print(f"\nsweeper pods Ready {min(ready_after):.0f}-{max(ready_after):.0f} s after they were created")
    _assert_locked_down(world, pods[0])

    # A job that exists and starts nothing (suspended at creation: no driver, no Spark run).
    live_job = world.example("windowed-counts.yaml", desiredState="suspended")
    live_job["metadata"] = {"name": "sweeper-keeps-this-one"}
    world.create(live_job)
    jobs = sweeper_root(world) / "jobs" / JOBS_NAMESPACE
    live, gone = jobs / world.uid("sweeper-keeps-this-one"), jobs / str(uuid.uuid4())
    _plant(live, age=2 * SWEEP_GRACE)
    _plant(gone, age=2 * SWEEP_GRACE)
    planted = time.monotonic()
    eventually(
        lambda: not gone.exists(), timeout=4 * SWEEP_INTERVAL + 10, what="the gone job's directory removed"
    )
    print(f"sweeper: a gone job's directory removed {time.monotonic() - planted:.1f} s after it was planted")
    # Two more passes of every sweeper: the live job's directory is still whole.
    passes = {p.metadata.name: _sweeps(world, p).get("done", 0) for p in pods}
    eventually(
        lambda: all(_sweeps(world, p).get("done", 0) >= passes[p.metadata.name] + 2 for p in pods),
        timeout=4 * SWEEP_INTERVAL + 10,
        what=lambda: f"two more passes of each sweeper: {[_sweeps(world, p) for p in pods]}",
    )
    assert (live / "state" / "s3a" / "ftspark-demo" / "1.zip").stat().st_size == 4096
    assert (live / "blockmgr" / "shuffle_0_0_0.data").exists()
    counters = [_sweeps(world, p) for p in pods]
    assert all(c.get("list_failed", 0) == 0 and c.get("scan_failed", 0) == 0 for c in counters), counters
    assert sum(c.get("dirs_removed", 0) for c in counters) >= 1, counters
    print(f"sweeper counters after the race: {counters}")
    # The job deleted, its directory goes at a next pass (it is older than the grace already).
    world.delete("sweeper-keeps-this-one")
    deleted = time.monotonic()
    eventually(lambda: not live.exists(), timeout=4 * SWEEP_INTERVAL + 10, what="the deleted job's directory")
    print(f"sweeper: a deleted job's directory removed {time.monotonic() - deleted:.1f} s after its deletion")
    # Racing one another for the same directories crashed none of them.
    restarts = {p.metadata.name: p.status.container_statuses[0].restart_count for p in _sweeper_pods(world)}
    assert set(restarts.values()) == {0}, restarts
    print(f"sweeper test: {time.monotonic() - started:.1f} s")


# The causes a user makes, on real kubelets: (its spec, the reason, what the message names). The waiting ones
# fail at the start timeout; the others end their driver (its log is kept); one waits on its executors.
_MISSING_CLAIM = {
    "containers": [{"name": "driver", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "no-such-claim"}}],
}
_MISSING_SECRET_KEY = {"secretKeyRef": {"name": "no-such-secret", "key": "token"}}
_MISSING_SECRET = {
    "containers": [{"name": "driver", "env": [{"name": "T", "valueFrom": _MISSING_SECRET_KEY}]}]
}
_SCRIPTS = {
    "exits": "import sys\nprint('no orders for 2026-11-21', file=sys.stderr)\nsys.exit(2)\n",
    "hoards": "print('loading every order', flush=True)\nheld = b'x' * (3 << 30)\n",
    # A UDF that raises on the executor, inside a streaming query: Spark's own words end in JVM frames.
    "udf": (
        "import sys\n"
        "from pyspark.sql import SparkSession, functions as F\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "ratio = F.udf(lambda value: 1 / (len(value) - len(value)), 'double')\n"
        "lines = spark.readStream.text(sys.argv[1]).select(ratio('value').alias('r'))\n"
        "lines.writeStream.foreachBatch(lambda batch, _: batch.collect()).start().awaitTermination()\n"
    ),
}
_WAITING: dict[str, tuple[dict[str, Any], tuple[str, ...], str]] = {
    # The pod asks the scheduler for its CPU request (the example's 500m), not its cores: ask for 64.
    "too-big": (
        {"driver": {"cores": 64}, "sparkConf": {DRIVER_REQUEST_CORES: "64"}},
        ("DriverUnschedulable",),
        "Insufficient cpu",
    ),
    "no-volume": (
        {"driver": {"podTemplate": {"spec": _MISSING_CLAIM}}},
        ("DriverVolumeNotBound",),
        "no-such-claim",
    ),
    "no-image": ({"image": "localhost/ftspark/no-such-image:0"}, ("ErrImagePull", "ImagePullBackOff"), ""),
    "no-secret": (
        {"driver": {"podTemplate": {"spec": _MISSING_SECRET}}},
        ("CreateContainerConfigError",),
        "no-such-secret",
    ),
}
_ENDED: dict[str, tuple[dict[str, Any], str, str]] = {
    # No executors: the scripts end before they would ask for any.
    "exits": (
        {"executor": {"instances": 0}},
        "ScriptFailed",
        "its last words on stderr: no orders for 2026-11-21",
    ),
    "hoards": ({"executor": {"instances": 0}}, "OOMKilled", ""),
    # The query's exception names the UDF's own error, which is what the user has to fix.
    "udf": ({}, "ScriptFailed", "StreamingQueryException: "),
    "no-executors": (
        {
            "executor": {"instances": 1, "cores": 64},
            # The least progress timeout a 1 s idle interval allows (it must exceed the interval by 10 s).
            "liveness": {"progressTimeoutSeconds": 11},
            "sparkConf": {
                "spark.kubernetes.executor.request.cores": "64",  # not the example's 500m
                "spark.sql.streaming.noDataProgressEventInterval": "1s",
                # Spark's session waits up to 30 s for executors before it schedules anything: not for these.
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "1s",
            },
        },
        "ExecutorsNotStarted",
        "Insufficient cpu",
    ),
    # Restarts allowed, but no restart brings the file: the job ends at the third attempt in a row.
    "no-file": (
        {
            "mainApplicationFile": "local:///opt/nowhere/job.py",
            "restartStrategy": {"type": "fixed-delay", "fixedDelay": {"attempts": 10, "delaySeconds": 1}},
        },
        "MainFileMissing",
        "/opt/nowhere/job.py",
    ),
}
_LOGGED = {"exits": "no orders for 2026-11-21", "hoards": "loading every order", "udf": "ZeroDivisionError"}
# A ResourceQuota without room for the drivers of one PriorityClass: the API server refuses the pod.
_QUOTA_CLASS = "ftspark-no-room"
_NO_ROOM = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": _QUOTA_CLASS},
    "spec": {
        "hard": {"pods": "0"},
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [_QUOTA_CLASS]}]
        },
    },
}
_START_TIMEOUT = 20  # seconds: spec.liveness.startTimeoutSeconds of the waiting ones


def test_each_cause_a_user_makes_is_named_in_the_status_and_an_event_and_a_failed_drivers_log_outlives_it(
    operator_installed: RealWorld, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every job here fails for a cause of its user's, once (restartStrategy none) but one. While a driver
    waits (no node fits, no volume, no image, no Secret) the job is Degraded with the scheduler's or the
    kubelet's words and an Event; at spec.liveness.startTimeoutSeconds it fails with that reason. A driver
    that ends (sys.exit(2), the OOM killer, a UDF raising in a streaming query, executors no node takes)
    fails with its reason, an Event, a row of what to do (docs/troubleshooting.md), and its log read by
    `ftspark logs` once its pod is gone. A main file that does not exist ends the job at its third attempt
    in a row (configurationFailures). A quota without room refuses the driver pod: Ready=False with the API
    server's words, and no pod."""
    world = operator_installed
    scheduling = client.SchedulingV1Api(world.api)
    scheduling.create_priority_class({"metadata": {"name": _QUOTA_CLASS}, "value": 0})
    world.core.create_namespaced_resource_quota(JOBS_NAMESPACE, _NO_ROOM)
    no_room = {"podTemplate": {"spec": {"priorityClassName": _QUOTA_CLASS}}}
    world.create(world.job("no-room", tmp_path / "in", tmp_path / "no-room", driver=no_room))
    s3 = world.s3.client()
    for name, text in _SCRIPTS.items():
        s3.put_object(Bucket=DEMO_BUCKET, Key=f"scripts/{name}.py", Body=text.encode())
    write_input(tmp_path / "in", 1)  # a batch to run: with no input, idle events would keep a query alive
    once: dict[str, Any] = {"restartStrategy": {"type": "none"}}
    for name, (spec, *_) in _WAITING.items():
        liveness = {"startTimeoutSeconds": _START_TIMEOUT}
        world.create(world.job(name, tmp_path / "in", tmp_path / name, **once, liveness=liveness, **spec))
    for name, (spec, *_) in _ENDED.items():
        script: dict[str, Any] = (
            {"mainApplicationFile": f"s3://{DEMO_BUCKET}/scripts/{name}.py"} if name in _SCRIPTS else {}
        )
        world.create(world.job(name, tmp_path / "in", tmp_path / name, **{**once, **script, **spec}))

    for name, (_, reasons, named) in _WAITING.items():
        degraded = eventually(
            partial(_condition, world, name, "Degraded"), timeout=60, what=f"{name}: Degraded"
        )
        assert degraded["reason"] in reasons and named in degraded["message"], degraded
        assert world.status(name)["phase"] == "Submitting", "waiting is no failure, yet"
    for name, (_, reasons, named) in _WAITING.items():
        failure = _failed(world, name)
        assert failure["reason"] in reasons, failure
        timed_out = f"not started within spec.liveness.startTimeoutSeconds ({_START_TIMEOUT} s)"
        assert timed_out in failure["message"], failure
        assert named in failure["message"], failure
    refused = eventually(partial(_condition, world, "no-room", "Ready", "False"), timeout=60, what="refused")
    assert refused["reason"] == "QuotaExceeded" and "exceeded quota" in refused["message"], refused
    assert any("QuotaExceeded" in said for said in _event_messages(world, "no-room")), "an Event says it"
    assert not world.drivers("no-room"), "nothing of the attempt is created"
    for name, (_, reason, named) in _ENDED.items():
        failure = _failed(world, name)
        assert failure["reason"] == reason and named in failure["message"], (failure, _kept_log(world, name))
    udf = world.status("udf")["lastFailure"]["message"]
    assert udf.endswith("(caused by ZeroDivisionError: division by zero)"), udf
    ended = world.status("no-file")
    said = _ready(ended)["message"]
    assert ended["attempt"] == 3 and "restartStrategy.configurationFailures: 3" in said, ended
    for name in (*_WAITING, *_ENDED):
        failure = world.status(name)["lastFailure"]
        assert failure["reason"] in REMEDIES, "docs/troubleshooting.md has its row, ftspark status its fix"
        assert any(failure["reason"] in said for said in _event_messages(world, name)), "an Event says it"

    for name, logged in _LOGGED.items():
        gone = partial(_no_driver, world, name)
        eventually(gone, timeout=60, what=f"{name}: its pod deleted")
        capsys.readouterr()
        assert _ftspark(world, "logs", name, "--attempt", "1") == 0
        shown = capsys.readouterr()
        assert logged in shown.out and f"pod {name}-1-driver is gone" in shown.err, shown
    for name in (*_WAITING, *_ENDED, "no-room"):
        world.delete(name)
    world.core.delete_namespaced_resource_quota(_QUOTA_CLASS, JOBS_NAMESPACE)
    scheduling.delete_priority_class(_QUOTA_CLASS)


def _ftspark(world: RealWorld, *args: str) -> int:
    """The ftspark CLI on this world's jobs, as a user runs it."""
    return cli(["--kubeconfig", str(world.plane.kubeconfig), "-n", JOBS_NAMESPACE, *args])


def _kept_log(world: RealWorld, name: str) -> str:
    found = world.core.read_namespaced_config_map(f"{name}-driver-logs", JOBS_NAMESPACE)
    return "\n".join((found.data or {}).values())[-6000:]


def _no_driver(world: RealWorld, name: str) -> bool:
    return not world.drivers(name)


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    ready: dict[str, Any] = next(c for c in status.get("conditions", []) if c["type"] == "Ready")
    return ready


def _condition(world: RealWorld, name: str, kind: str, status: str = "True") -> dict[str, Any] | None:
    found = [c for c in world.status(name).get("conditions", []) if c["type"] == kind]
    return found[0] if found and found[0]["status"] == status else None


def _failed(world: RealWorld, name: str) -> dict[str, Any]:
    status = eventually(
        lambda: (status := world.status(name)).get("phase") == "Failed" and status,
        timeout=240,
        what=lambda: f"{name}: Failed; {world.status(name)}",
    )
    failure: dict[str, Any] = status["lastFailure"]
    return failure


def _event_messages(world: RealWorld, name: str) -> list[str]:
    selector = f"involvedObject.uid={world.uid(name)}"
    events = world.core.list_namespaced_event(JOBS_NAMESPACE, field_selector=selector).items
    return [f"{e.reason}: {e.message}" for e in events]


@pytest.mark.timeout(1800)
def test_the_example_job_survives_faults_on_real_containers_exactly_once(
    operator_installed: RealWorld, tmp_path: Path
) -> None:
    """With task-local recovery on, in a namespace at Pod Security baseline (its root in this world's
    directory, so the namespace has the job policy's hostPath allowance): the executors mount the job's
    directory through its claim, write their copies into it (the kubelet made it), and a restarted executor
    reads its state from them, none from S3."""
    world = operator_installed
    # The kubelet probes every 5 s and kills after 2 unanswered probes (10-15 s), as a user may tune it in the
    # driver's pod template (docs/driver-runtime.md); the defaults (10 s, 3) take 30-40 s.
    probe = {"periodSeconds": 5, "failureThreshold": 2}
    template = {"spec": {"containers": [{"name": "driver", "livenessProbe": probe}]}}
    local = {"enabled": True, "hostPath": str(sweeper_root(world))}
    spec = {
        "driver": {"standby": 1, "podTemplate": template},
        "localRecovery": local,
        "ui": {"enabled": True},
    }
    with _local_recovery_namespace(world), RealFaultTour(world, tmp_path, spec=spec) as tour:
        tour.start()
        state = sweeper_root(world) / "jobs" / JOBS_NAMESPACE / world.uid(tour.name) / "state"
        _mount_the_directory_through_the_claim(world)
        since = world.s3.access_log_offset()
        tour.kill_executor()
        assert state.parent.stat().st_mode & 0o7777 == 0o1777, "opened to the executor's user (the kubelet's)"
        copies = [p for p in state.rglob("*") if p.is_file() and "_stats" not in p.parts]
        assert copies and {p.stat().st_uid for p in copies} == {185}, "the executors' own copies"
        # The restarted executor restored from the node's copies (the first one had nothing to restore).
        restored = _restored_locally(world, tour.name, state, since, before=set())
        size = sum(p.stat().st_size for p in copies)
        print(f"\nlocal copies {len(copies)} files, {size} B; an executor restart read {restored} B of them")
        tour.wait_for_standby()
        before, since = set(jvm_counters(state)), world.s3.access_log_offset()
        tour.kill_driver()
        assert tour.events().count("StandbyPromoted") == 1, "the hot standby took over from the killed driver"
        print(
            f"promoted: executors read {_restored_locally(world, tour.name, state, since, before)} B locally"
        )
        frozen = tour.freeze_driver()
        assert {"Unhealthy", "Killing"} <= set(world.events(frozen)), (
            "the liveness probe found it, the kubelet kills"
        )
        # Resumed with the kill pending: it lands, or the driver finds its Lease gone and stops first.
        assert world.status(tour.name)["lastFailure"]["reason"] in {"DriverKilled", "LeaseLost"}
        tour.kill_leader()
        attempt = world.status(tour.name)["attempt"]
        tour.kill_node()
        assert world.status(tour.name)["attempt"] > attempt
        assert world.status(tour.name)["lastFailure"]["reason"] == "NodeLost"
        tour.stop_and_resume()
        tour.drain_node()  # the standby takes over, no failure is counted
        assert _ui_applications(world, tour.name) == [spark_app_id(world.uid(tour.name), tour.attempt())]
        figures = tour.finish()
        print(f"\nreal nodes:\n{tour.report(figures)}")
        assert (figures["lost"], figures["duplicated"]) == (0, 0)
        at_once = (figures["most drivers alive at once"], figures["most operator leaders acting at once"])
        assert at_once == (1, 1), "never two drivers of one job at once, nor two acting leaders"
        faults = sum(step.endswith("-> next batch") for step in tour.recovery)
        assert figures["re-processed by re-run batches"] <= faults * RECORDS_PER_FILE, (
            "at most one batch a fault"
        )
        events = tour.events()
        assert {"Submitted", "Restarting", "Stopping", "Stopped", "Resumed"} <= set(events), events
        # The driver kill, the freeze and the node kill: each answered by a new attempt, or by the standby
        # when one was ready by then (which of the two is a matter of timing).
        assert events.count("Restarted") + events.count("StandbyPromoted") >= 3, events
        # ... and each timed by the operator, step by step (status.lastFailure.recoveryPhases).
        assert [fault.split(" (")[0] for fault, _ in tour.timings] == [
            "driver kill",
            "driver container frozen",
            "node kill",
        ], tour.timings


@pytest.mark.timeout(900)
def test_a_users_own_image_of_the_other_spark_line_runs_the_job_exactly_once(
    operator_installed: RealWorld, tmp_path: Path
) -> None:
    """docs/own-image.md as a user follows it, on the other Spark line (4.0): examples/own-image/Dockerfile
    applied to a plain Spark image of that line (tools/images/build.sh own-image). The runtime runs on that
    Spark with S3A from Spark's own jars, through a driver kill and a stop and resume."""
    world = operator_installed
    spec = {"image": OWN_IMAGE, "mainApplicationFile": "local:///opt/app/windowed_counts.py"}
    with RealFaultTour(world, tmp_path, subject=WindowedCounts(name="counts-own"), spec=spec) as tour:
        tour.start()
        driver = tour.current_driver()
        assert driver.spec.containers[0].image == OWN_IMAGE
        check = (
            "import os, pyspark; print(pyspark.__version__, os.path.isdir('/opt/ftspark/jars'), "
            "sorted(f.split('-')[0] for f in os.listdir(os.environ['SPARK_HOME'] + '/jars') if 'aws' in f))"
        )
        seen = world.plane.kubectl(
            "-n", JOBS_NAMESPACE, "exec", driver.metadata.name, "--", "python", "-c", check
        )
        assert seen.stdout.strip().split(maxsplit=2) == [OTHER_LINE.pyspark, "False", "['hadoop']"], (
            seen.stdout
        )
        tour.kill_driver()
        tour.stop_and_resume()
        figures = tour.finish()
        print(f"\nSpark {OTHER_LINE.pyspark} in a user-style image:\n{tour.report(figures)}")
        assert (figures["lost"], figures["duplicated"]) == (0, 0)
        assert figures["most drivers alive at once"] == 1
        assert {"Restarted", "Stopped", "Resumed"} <= set(tour.events()), tour.events()


def _ui_applications(world: RealWorld, name: str) -> list[str]:
    """The Spark applications the job's UI Service answers for, from the host (kube-proxy routes it): the
    current attempt's alone, through every driver kill, promotion and drain before."""
    service = world.core.read_namespaced_service(ui_service_name(name), JOBS_NAMESPACE)
    url = f"http://{service.spec.cluster_ip}:{UI_PORT}/api/v1/applications"
    # A UI's first REST answer may wait for Spark to start its REST layer: 10 s once ran out on these
    # busy nodes.
    with urllib.request.urlopen(url, timeout=60) as answer:
        return [app["id"] for app in json.loads(answer.read())]


def _mount_the_directory_through_the_claim(world: RealWorld) -> None:
    """The executors have no hostPath (Pod Security baseline admits them): the job's directory is its
    claim's volume."""
    executors = world.core.list_namespaced_pod(JOBS_NAMESPACE, label_selector="spark-role=executor").items
    volumes = [v for pod in executors for v in pod.spec.volumes]
    assert executors and not [v for v in volumes if v.host_path], volumes
    assert [v for v in volumes if v.persistent_volume_claim], volumes


@contextlib.contextmanager
def _local_recovery_namespace(world: RealWorld) -> Iterator[None]:
    """The jobs' namespace at Pod Security baseline (localRecovery's init step runs as root), with the job
    policy's hostPath allowance (a root other than the default's); then back at restricted without it."""
    on = ["pod-security.kubernetes.io/enforce=baseline", "allow.ftspark.io/hostPath=true"]
    world.plane.kubectl("label", "--overwrite", "namespace", JOBS_NAMESPACE, *on)
    try:
        yield
    finally:
        off = ["pod-security.kubernetes.io/enforce=restricted", "allow.ftspark.io/hostPath-"]
        world.plane.kubectl("label", "--overwrite", "namespace", JOBS_NAMESPACE, *off)


def _restored_locally(world: RealWorld, name: str, state: Path, since: int, before: set[str]) -> int:
    """The bytes of state that JVMs started after `before` (their counters' names) read from local copies,
    once some did; none of them from S3, by their own count and at the S3 server (no state file read there
    since the access log's offset `since` but the driver runtime's checks of their first bytes)."""

    def restores() -> dict[str, dict[str, int]] | None:
        found = {
            jvm: c for jvm, c in jvm_counters(state).items() if jvm not in before and c.get("bytesReadLocal")
        }
        return found or None

    found = eventually(restores, timeout=30, what="a restore from local copies")
    assert all(counters.get("bytesReadPrimary", 0) == 0 for counters in found.values()), found
    prefix = f"{DEMO_BUCKET}/jobs/{name}/"
    state_reads = [
        read
        for read in world.s3.object_reads(since)
        if read.object.startswith(prefix) and read.object.endswith((".delta", ".snapshot"))
    ]
    # Spark's reads (S3A's), not the driver runtime's check of the newest files' first bytes (Boto3's) before
    # a restart (tests/runtime/test_checkpoint_files.py: a ranged read).
    data_reads = [read for read in state_reads if not read.client.startswith("Boto3/")]
    pods = {p.status.pod_ip: p.metadata.name for p in world.core.list_namespaced_pod(JOBS_NAMESPACE).items}
    readers = [(pods.get(read.reader, read.reader), read.object, read.client) for read in data_reads]
    assert data_reads == [], f"state read from S3, as its server counts: {readers}; {jvm_counters(state)}"
    return sum(counters["bytesReadLocal"] for counters in found.values())


def test_plain_manifests_install_the_same_operator(operator_installed: RealWorld) -> None:
    world = operator_installed
    world.helm_uninstall()
    world.plane.kubectl("apply", "-f", str(BUNDLE))
    # The edits the quickstart names: the S3 endpoint, and credentials from the Secret `s3`.
    world.plane.kubectl(
        *("-n", OPERATOR_NAMESPACE, "set", "env", "deployment/ftspark-operator"),
        *(f"FTSPARK_S3_ENDPOINT={world.s3.endpoint}", "--from=secret/s3"),
    )
    world.plane.kubectl(
        "-n", OPERATOR_NAMESPACE, "rollout", "status", "deployment/ftspark-operator", "--timeout=300s"
    )
    eventually(
        lambda: world.operator_leader() in {p.metadata.name for p in world.operator_pods()}
        and world.acting_leaders() == [world.operator_leader()],
        timeout=90,
        what="a leader among the manifest's replicas",
    )


# Whatever carries one of these labels is ftspark's: its own objects, a job's pods, Secrets and
# NetworkPolicies, the HA records and results.
FTSPARK_SELECTORS = (
    "app.kubernetes.io/managed-by=ftspark",
    JOB_LABEL,
    "ftspark.io/store",
    "ftspark.io/result",
)
FTSPARK_KINDS = (
    "pods,configmaps,secrets,leases,serviceaccounts,roles,rolebindings,networkpolicies,"
    "poddisruptionbudgets,services,ingresses,persistentvolumeclaims,persistentvolumes"
)


def _ftspark_objects(world: RealWorld) -> list[str]:
    found = [
        line
        for selector in FTSPARK_SELECTORS
        for line in world.plane.kubectl(
            "get", FTSPARK_KINDS, "-A", "-l", selector, "-o", "name"
        ).stdout.split()
    ]
    crds = ("faulttolerantsparkjobs.ftspark.io", "scheduledsparkjobs.ftspark.io")
    left = [name for name in crds if world.plane.kubectl("get", "crd", name, check=False).returncode == 0]
    return found + left


def test_the_documented_uninstall_leaves_no_object_of_ftsparks(operator_installed: RealWorld) -> None:
    """docs/operations.md's last two shell blocks as written (the plain manifests' uninstall, then every
    namespace of jobs), after the jobs above ran: nothing labelled as ftspark's is left."""
    world = operator_installed
    before = _ftspark_objects(world)
    assert before, "ftspark's objects are there before the uninstall: this test could fail"
    assert "poddisruptionbudget.policy/ftspark-drivers" in before, "the drivers' budget, which has no owner"
    page = (REPO_ROOT / "docs" / "operations.md").read_text()
    *_, uninstall, namespaces = re.findall(r"^```sh\n(.*?)^```$", page, flags=re.MULTILINE | re.DOTALL)
    _run_shell(world, uninstall + namespaces, "the documented uninstall")
    # A job's pods go with it through the garbage collector, after the deletes have returned.
    eventually(
        lambda: not _ftspark_objects(world),
        timeout=120,
        what=lambda: f"no object of ftspark's left: {_ftspark_objects(world)}",
    )
