"""Task-local recovery through the whole installation: examples/keyed_totals.py (RocksDB state) as a
FaultTolerantSparkJob on process-backed nodes, an executor and then the driver SIGKILLed, and per restart the
time to the first batch after it and the state bytes the new executors read from S3 and from their node's disk
(the wrapper's counters, `<hostPath>/jobs/<namespace>/<uid>/state/_stats/<host>-<pid>.json` on each node).

Shared by the end-to-end test (e2e/test_local_recovery.py, small state) and `make bench` (as much state as
fits here): `python -m ftspark_dev.worlds.local_recovery --keys 2000000 --payload 200 --files 8`.

Without localRecovery the job still runs the wrapper, as a pass-through with no local dir (uploads alike with
and without copies: ftspark_dev.subjects.localrecovery). Then every state byte comes from S3 and the
wrapper counts none.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from ftspark.manifests import local_recovery_conf
from ftspark.protocol import SPARK_APP_SELECTOR_LABEL, executor_selector, spark_app_id
from ftspark_dev.cluster.netproxy import TcpProxy
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.subjects.localrecovery import (
    expected_totals,
    state_size_parser,
    totals,
    write_ranges,
)
from ftspark_dev.worlds.process_nodes import JOBS_NAMESPACE, World, running_world

KEYED_TOTALS = REPO_ROOT / "examples" / "keyed_totals.py"
HOST_PATH = "/var/lib/ftspark/local-state"
MiB = 1 << 20


def local_recovery_jar() -> str:
    built = subprocess.run(
        [str(REPO_ROOT / "tools" / "local_recovery_jar.sh")], check=True, capture_output=True, text=True
    )
    return built.stdout.strip()


@dataclass(frozen=True)
class Restart:
    fault: str
    seconds: float  # fault -> the first batch after it written
    state_from_s3: int  # bytes of state files the wrapper read from S3 meanwhile
    state_from_local: int  # ... and from node-local copies
    nodes_before: tuple[str, ...]  # where the executors ran before the fault
    nodes_after: tuple[str, ...]  # ... and after it


class StateJob:
    """One keyed_totals job on a World; ids come in files of `per_file` ranges, each file one batch."""

    def __init__(
        self,
        world: World,
        work: Path,
        name: str,
        *,
        keys: int,
        payload: int,
        local_recovery: bool,
        jar: str,
        totals: bool = False,
        changelog: bool = False,
        executor_memory: str = "1g",
        s3a_endpoint: str | None = None,
    ) -> None:
        """totals: the job writes every changed group's totals (checkable, for small state), else counts;
        changelog: RocksDB's changelog checkpointing (spec.stateStore)."""
        self.world, self.name, self.keys, self.payload = world, name, keys, payload
        self.source, self.output = work / name / "in", work / name / "out"
        self.files = 0
        self.ranges: list[tuple[int, int]] = []
        env = [{"name": "FTSPARK_LOCAL_RECOVERY_JAR", "value": jar}]
        spark_conf = {
            **({} if local_recovery else local_recovery_conf(None)),
            **({"spark.hadoop.fs.s3a.endpoint": s3a_endpoint} if s3a_endpoint else {}),
        }
        manifest = world.job(name, self.source, self.output)
        spec = manifest["spec"]
        spec["mainApplicationFile"] = f"local://{KEYED_TOTALS}"
        spec["arguments"] = [
            str(self.source),
            str(self.output),
            str(keys),
            str(payload),
            "totals" if totals else "count",
        ]
        spec["env"] = [*spec["env"], *env]
        spec["sparkConf"] = {**spec["sparkConf"], **spark_conf}
        spec["stateStore"] = {"provider": "rocksdb", "changelogCheckpointing": changelog}
        spec["executor"] = {"instances": 1, "memory": executor_memory}
        spec["driver"] = {"memory": "1g"}
        if local_recovery:
            spec["localRecovery"] = {"enabled": True, "hostPath": HOST_PATH}
        self.manifest = manifest

    def load(self, ids: int, files: int) -> float:
        """Submits the job with `files` input files of ids; seconds until all are processed."""
        per_file = ids // files
        for n in range(files):
            self._write(n * per_file, per_file)
        started = time.monotonic()
        self.world.create(self.manifest)
        self._wait_for_batches(files, 3600)
        return time.monotonic() - started

    def restart_after(self, fault: str) -> Restart:
        """SIGKILLs the executors ("executor") or the driver ("driver"), adds a small file and waits for its
        batch; the wrapper's counters are summed over every JVM on every node, before and after."""
        before, nodes_before = self._counters(), self._executor_nodes()
        batches = self._batches()
        killed = time.monotonic()
        if fault == "executor":
            assert self.world.nodes.kill_pods(JOBS_NAMESPACE, f"{SPARK_APP_SELECTOR_LABEL}={self._app()}")
        else:
            self.world.nodes.kill_pod(JOBS_NAMESPACE, self.world.drivers(self.name)[-1].metadata.name)
        self._write(10**12 + self.files, 100)
        self._wait_for_batches(batches + 1, 900)
        seconds = time.monotonic() - killed
        after = self._counters()
        return Restart(
            fault,
            seconds,
            after.get("bytesReadPrimary", 0) - before.get("bytesReadPrimary", 0),
            after.get("bytesReadLocal", 0) - before.get("bytesReadLocal", 0),
            nodes_before,
            self._executor_nodes(),
        )

    def state_on_s3(self) -> int:
        """Bytes under the job's checkpoints' state/ directories (all retained versions)."""
        bucket = self.world.bucket
        total = 0
        pages = (
            self.world.s3.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=bucket, Prefix=f"jobs/{self.name}/")
        )
        for page in pages:
            total += sum(o["Size"] for o in page.get("Contents", []) if "/state/" in o["Key"])
        return total

    def local_copies(self) -> int:
        """Bytes of the wrapper's copies on every node (not Spark's own local dir beside them)."""
        return sum(
            p.stat().st_size
            for state in self._state_dirs()
            for p in state.rglob("*")
            if p.is_file() and "_stats" not in p.parts
        )

    # -- helpers ------------------------------------------------------------------------------------------

    def written_and_expected(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        """What the job wrote (totals mode), and what it should have."""
        return totals(self.output), expected_totals(self.ranges, self.keys)

    def _write(self, first: int, count: int) -> None:
        write_ranges(self.source, f"part-{self.files:05d}.csv", [(first, count)])
        self.ranges.append((first, count))
        self.files += 1

    def _batches(self) -> int:
        return len(list(self.output.glob("batch-*.json"))) if self.output.exists() else 0

    def _wait_for_batches(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._batches() < count:
            if time.monotonic() > deadline:
                drivers = self.world.drivers(self.name)
                log = self.world.nodes.log(JOBS_NAMESPACE, drivers[-1].metadata.name) if drivers else ""
                raise AssertionError(
                    f"{self.name}: {self._batches()} of {count} batches after {timeout} s; "
                    f"{self.world.status(self.name)}\n{log[-3000:]}"
                )
            time.sleep(0.5)

    def _app(self) -> str:
        return spark_app_id(self.world.uid(self.name), self.world.status(self.name)["attempt"])

    def _executor_nodes(self) -> tuple[str, ...]:
        pods = (
            client.CoreV1Api(self.world.api)
            .list_namespaced_pod(JOBS_NAMESPACE, label_selector=executor_selector(self._app()))
            .items
        )
        return tuple(sorted(p.spec.node_name for p in pods if p.status.phase == "Running"))

    def _state_dirs(self) -> list[Path]:
        """The job's copies on each node: its own directory under the hostPath (ftspark.manifests)."""
        job_dir = Path(HOST_PATH.lstrip("/"), "jobs", JOBS_NAMESPACE, self.world.uid(self.name), "state")
        return [node.root / "host" / job_dir for node in self.world.nodes.nodes]

    def _counters(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for state in self._state_dirs():
            for stats in jvm_counters(state).values():
                for key, value in stats.items():
                    totals[key] = totals.get(key, 0) + int(value)
        return totals


def jvm_counters(state: Path) -> dict[str, dict[str, int]]:
    """The local-recovery wrapper's counters in a job's state directory on a node, by JVM
    (`_stats/<host>-<pid>.json`, its name); a file being rewritten is left out."""
    found = {}
    for path in (state / "_stats").glob("*.json"):
        with contextlib.suppress(ValueError):
            found[path.stem] = json.loads(path.read_text())
    return found


def main() -> None:
    parser = state_size_parser(__doc__, keys=2_000_000, files=8)
    parser.add_argument(
        "--s3-mib-per-second",
        type=float,
        default=None,
        help="Spark reaches S3 through a proxy that allows this much per connection (a model of a remote "
        "S3; default: loopback speed)",
    )
    args = parser.parse_args()
    jar = local_recovery_jar()
    rows = []
    with (
        running_world() as world,
        tempfile.TemporaryDirectory(prefix="ftspark-lr-world-") as work,
        contextlib.ExitStack() as stack,
    ):
        endpoint = None
        if args.s3_mib_per_second:
            proxy = TcpProxy(world.s3.port, bytes_per_second=args.s3_mib_per_second * MiB)
            stack.callback(proxy.close)
            endpoint = f"http://127.0.0.1:{proxy.port}"
        link = f"{args.s3_mib_per_second:g} MiB/s per connection" if endpoint else "loopback"
        print(f"S3 for Spark: {link}", flush=True)
        for local in (True, False):
            name = "with-copies" if local else "without"
            job = StateJob(
                world,
                Path(work),
                name,
                keys=1 << 62,  # every id its own key
                payload=args.payload,
                local_recovery=local,
                jar=jar,
                executor_memory="3g",
                s3a_endpoint=endpoint,
            )
            loaded = job.load(args.keys, args.files)
            state, copies = job.state_on_s3(), job.local_copies() if local else 0
            print(
                f"{name}: {args.keys} keys x {args.payload} B, {args.files} batches: {loaded:.0f} s; "
                f"state on S3 {state / MiB:.0f} MiB, local copies {copies / MiB:.0f} MiB",
                flush=True,
            )
            for fault in ("executor", "driver"):
                restart = job.restart_after(fault)
                rows.append((name, restart))
                print(f"  {restart}", flush=True)
            world.delete(name)
    print(f"\n{'run':<13}{'fault':<10}{'first batch s':>14}{'state from S3 MiB':>19}{'local MiB':>11}  nodes")
    for name, r in rows:
        from_s3 = f"{r.state_from_s3 / MiB:.1f}" if name == "with-copies" else "all"
        print(
            f"{name:<13}{r.fault:<10}{r.seconds:>14.1f}{from_s3:>19}"
            f"{r.state_from_local / MiB:>11.1f}  {','.join(r.nodes_before)} -> {','.join(r.nodes_after)}"
        )
    print("(without copies the wrapper counts nothing: every state byte of the restore comes from S3)")


if __name__ == "__main__":
    main()
