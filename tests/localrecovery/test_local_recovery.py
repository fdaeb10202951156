"""Task-local recovery with real PySpark (local[2]), RocksDB state on the loopback S3 through S3A, and the
wrapper jar on the classpath. Every run is a new JVM, so Spark restores its state from the checkpoint: the
path the node-local copies accelerate. Each test runs the job, then restarts it with one more input file."""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ftspark.domain.models import JobSpec as FtsparkJobSpec
from ftspark.manifests import (
    AttemptPlan,
    executor_pod_template,
    local_state_claim,
    local_state_volume,
    spark_conf,
)
from ftspark_dev.cluster.s3server import S3Server
from ftspark_dev.subjects.localrecovery import (
    JobSpec,
    expected_totals,
    new_key,
    run_job,
    totals,
    write_ranges,
)

KEYS = 20_000
PER_FILE = 60_000
pytestmark = pytest.mark.slow


@dataclass
class Node:
    """The job's checkpoint on S3 and its input; runs record results under the tmp folder."""

    spec: JobSpec
    work: Path
    s3: S3Server
    bucket: str
    files: int = 0
    runs: int = 0

    def add_input(self, files: int) -> None:
        for _ in range(files):
            name = f"part-{self.files:04d}.csv"
            write_ranges(Path(self.spec.input), name, [(self.files * PER_FILE, PER_FILE)])
            self.files += 1

    def run(self, local_dir: Path | None) -> dict[str, Any]:
        self.runs += 1
        spec = replace(
            self.spec,
            local_dir=None if local_dir is None else str(local_dir),
            result=str(self.work / f"result-{self.runs}.json"),
        )
        result = run_job(spec, self.log(), timeout=300)
        expected = expected_totals([(0, self.files * PER_FILE)], KEYS)
        assert totals(Path(self.spec.output or "")) == expected
        assert result["batches"], "no batch ran"
        return result

    def log(self) -> Path:
        """The latest run's log."""
        return self.work / f"job-{self.runs}.log"

    def state_objects(self) -> dict[str, bytes]:
        client = self.s3.client()
        listing = client.list_objects_v2(Bucket=self.bucket, Prefix="ck/state/")
        return {
            item["Key"]: client.get_object(Bucket=self.bucket, Key=item["Key"])["Body"].read()
            for item in listing.get("Contents", [])
        }


def local_copies(local_dir: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in local_dir.rglob("*") if p.is_file() and p.name.endswith(suffixes))


@pytest.fixture
def node(
    s3_server: S3Server, bucket: str, s3a_jars: Path, local_recovery_jar: Path, tmp_path: Path, request: Any
) -> Node:
    spec = JobSpec(
        endpoint=s3_server.endpoint,
        checkpoint=f"s3a://{bucket}/ck",
        input=str(tmp_path / "input"),
        output=str(tmp_path / "output"),
        result="",
        s3a_jars=str(s3a_jars),
        jar=str(local_recovery_jar),
        local_dir=None,
        key_file=new_key(tmp_path / "job-key"),
        keys=KEYS,
        changelog=getattr(request, "param", False),
    )
    return Node(spec, tmp_path, s3_server, bucket)


@pytest.mark.parametrize("node", [False, True], ids=["snapshots", "changelog"], indirect=True)
def test_same_node_restart_reads_state_locally(node: Node, tmp_path: Path) -> None:
    local = tmp_path / "node-local"
    node.add_input(3)
    first = node.run(local)["stats"]
    assert first["localFilesWritten"] > 0 and first["localWriteFailures"] == 0

    node.add_input(1)
    restart = node.run(local)
    stats = restart["stats"]
    assert stats["localHits"] > 0
    assert stats["localMisses"] == stats["localCorrupt"] == stats["localStale"] == 0
    assert stats["bytesReadPrimary"] == 0
    # S3A itself (counted by Hadoop, not by us) read only offsets, commits and metadata: no state file bytes.
    assert restart["s3aBytesRead"] < stats["bytesReadLocal"] / 10, restart
    # Each JVM also left its counters in the local dir (for executors that py4j cannot reach).
    hits = [json.loads(f.read_text())["localHits"] for f in (local / "_stats").glob("*.json")]
    assert len(hits) == 2 and max(hits) >= stats["localHits"]


@pytest.mark.parametrize("node", [False, True], ids=["snapshots", "changelog"], indirect=True)
def test_lost_node_restores_from_s3(node: Node, tmp_path: Path) -> None:
    node.add_input(3)
    node.run(tmp_path / "old-node")

    node.add_input(1)
    new_node = tmp_path / "new-node"
    restart = node.run(new_node)
    stats = restart["stats"]
    assert stats["localMisses"] > 0 and stats["bytesReadPrimary"] > 0
    # Whatever was served locally had been fetched in this run (Spark reads some files twice).
    assert stats["bytesReadLocal"] <= stats["bytesReadPrimary"]
    assert restart["s3aBytesRead"] >= stats["bytesReadPrimary"]
    # The restored files are node-local now, byte for byte the primary's.
    objects = node.state_objects()
    copies = local_copies(new_node, (".zip", ".sst", ".changelog", ".log"))
    assert copies
    for copy in copies:
        key = copy.relative_to(new_node / "s3a" / node.bucket).as_posix()
        assert copy.read_bytes() == objects[key], key


def test_corrupt_local_copy_is_replaced_from_s3(node: Node, tmp_path: Path) -> None:
    local = tmp_path / "node-local"
    node.add_input(3)
    node.run(local)

    damaged = local_copies(local, (".zip", ".sst"))
    assert damaged
    for copy in damaged:
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size: only the checksum can tell
        copy.write_bytes(bytes(data))

    node.add_input(1)
    stats = node.run(local)["stats"]
    assert stats["localCorrupt"] >= 2  # the latest zip and at least one SST
    assert stats["bytesReadPrimary"] > 0
    assert stats["bytesReadLocal"] <= stats["bytesReadPrimary"]  # served locally only after a fetch
    # The restored version's copies are the primary's bytes again.
    objects = node.state_objects()
    restored = local_copies(local, ("3.zip",))
    assert len(restored) == 2
    for copy in restored:
        assert copy.read_bytes() == objects[copy.relative_to(local / "s3a" / node.bucket).as_posix()]


def test_broken_local_disk_never_fails_a_checkpoint(node: Node, tmp_path: Path) -> None:
    # Every local write fails (ENOTDIR, also as root): like a full or dead disk.
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    broken = not_a_dir / "node-local"
    node.add_input(3)
    stats = node.run(broken)["stats"]
    assert stats["localWriteFailures"] > 0 and stats["localFilesWritten"] == 0
    assert any(key.endswith(".zip") for key in node.state_objects())

    node.add_input(1)
    restart = node.run(broken)["stats"]
    assert restart["localHits"] == 0 and restart["bytesReadPrimary"] > 0


DATA = (".zip", ".sst", ".changelog", ".log")


def _java_utf(text: str) -> bytes:
    """java.io.DataOutputStream.writeUTF of an ASCII string: its length in two bytes, then its bytes."""
    data = text.encode("ascii")
    return struct.pack(">H", len(data)) + data


def forge(copy: Path, content: bytes, remote: str, key: bytes) -> None:
    """What a node-level attacker who can write the job's directory does: replace a copy with other bytes and
    give it a record in the wrapper's format (jvm/local-recovery LocalStore), MACed with a key it has."""
    record = copy.with_name(copy.name + ".lrmeta")
    identity = record.read_text().split(" ", 3)[3]
    digest = hashlib.sha256(content).digest()
    message = (
        _java_utf("ftspark-local-recovery-v1")
        + _java_utf(remote)
        + _java_utf(identity)
        + struct.pack(">q", len(content))
        + digest
    )
    mac = hmac.new(key, message, hashlib.sha256).hexdigest()
    copy.write_bytes(content)
    record.write_text(f"{len(content)} {digest.hex()} {mac} {identity}")


def test_another_job_cannot_see_or_forge_a_jobs_copies(node: Node, tmp_path: Path) -> None:
    """Jobs A (this node's job) and B on one node, laid out by the operator's own manifests: B's executor
    mounts only B's directory, and copies forged into A's directory with B's key (tenant B as a node-level
    attacker) are rejected: A's restore reads S3 instead, says so, and its results stay right."""
    host_path = tmp_path / "node"
    spec = FtsparkJobSpec.model_validate(
        {
            "image": "spark:4",
            "mainApplicationFile": "local:///job.py",
            "checkpoint": {"storage": f"s3://{node.bucket}/ck"},
            "localRecovery": {"enabled": True, "hostPath": str(host_path)},
        }
    )
    jobs = {
        name: AttemptPlan(namespace, name, uid, 1, spec, node.spec.checkpoint, "latest-checkpoint")
        for name, namespace, uid in [
            ("a", "tenant-a", "aaaaaaaa-1111-2222-3333-444444444444"),
            ("b", "tenant-b", "bbbbbbbb-1111-2222-3333-444444444444"),
        ]
    }
    local_dirs = {
        name: Path(spark_conf(job)["spark.hadoop.fs.ftspark.local-recovery.dir"])
        for name, job in jobs.items()
    }
    for name, job in jobs.items():
        volumes = executor_pod_template(job)["spec"]["volumes"]
        [claim] = [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]
        assert claim == local_state_claim(job)["metadata"]["name"]  # bound to the job's volume alone
        mounted = Path(local_state_volume(job)["spec"]["hostPath"]["path"])
        # Each executor's only view of the node is its own job's directory, which holds its copies.
        assert local_dirs[name].parent == mounted
        others = [d for other, d in local_dirs.items() if other != name]
        assert all(not d.is_relative_to(mounted) for d in others), (name, mounted, others)
        mounted.mkdir(parents=True)  # what the kubelet does for hostPath type DirectoryOrCreate
    key_b = new_key(tmp_path / "key-b")

    node.add_input(3)
    assert node.run(local_dirs["a"])["stats"]["localFilesWritten"] > 0
    copies = local_copies(local_dirs["a"], DATA)
    assert copies
    objects = node.state_objects()
    for copy in copies:
        key = copy.relative_to(local_dirs["a"] / "s3a" / node.bucket).as_posix()
        tampered = bytearray(objects.get(key, copy.read_bytes()))
        tampered[len(tampered) // 2] ^= 0xFF
        forge(copy, bytes(tampered), f"s3a://{node.bucket}/{key}", Path(key_b).read_bytes())

    node.add_input(1)
    stats = node.run(local_dirs["a"])["stats"]  # checks the totals against the input too
    assert stats["localRejected"] >= 2  # at least the latest zip of each of the two partitions
    assert stats["localCorrupt"] == 0, "rejected on the MAC, before any content is read"
    assert stats["bytesReadPrimary"] > 0
    assert stats["bytesReadLocal"] <= stats["bytesReadPrimary"]  # served locally only after a fetch
    assert "has no valid MAC under this job's key" in node.log().read_text(errors="replace")
    objects = node.state_objects()
    for copy in local_copies(local_dirs["a"], ("3.zip",)):
        assert (
            copy.read_bytes() == objects[copy.relative_to(local_dirs["a"] / "s3a" / node.bucket).as_posix()]
        )
