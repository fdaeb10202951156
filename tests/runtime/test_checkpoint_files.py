"""The checkpoint-directory logic (rollback, savepoint file selection and restore) on synthetic Spark
checkpoints on the S3 server: fast, and exact about which files are kept, copied and deleted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ftspark.domain.restart import CONFIGURATION_CAUSES
from ftspark.protocol import PROTOCOL_VERSION, DriverEnv, Exit, RuntimeEnv
from ftspark.runtime import savepoint
from ftspark.runtime.checkpoint import CheckpointDir, CheckpointError
from ftspark.runtime.config import ConfigError, ProtocolMismatchError, RuntimeConfig
from ftspark.runtime.driver import main as driver_main
from ftspark.runtime.objects import ObjectStore
from ftspark.runtime.savepoint import SavepointError
from ftspark.runtime.termination import MAX_MESSAGE_BYTES, Ending
from ftspark_dev.cluster.s3server import S3Server

OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"logOffset":%d}\n'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}\n'
DELTA = b"LZ4Block" + b"\x00" * 8


@pytest.fixture
def store(s3_server: S3Server, bucket: str) -> ObjectStore:
    return ObjectStore(s3_server.client())


def _checkpoint(store: ObjectStore, location: str, batches: int, *, snapshot_at: int | None = None) -> None:
    """A stateful query with 2 state partitions that committed batches 0..batches-1 and has the offsets of
    batch `batches` logged (running when the driver died)."""
    files: dict[str, bytes] = {"metadata": b'{"id":"q"}', "state/0/_metadata/schema": b"schema"}
    for n in range(batches + 1):
        files[f"offsets/{n}"] = (OFFSETS % n).encode()
        files[f"sources/0/{n}"] = b'v1\n{"path":"f"}\n'
    for n in range(batches):
        files[f"commits/{n}"] = COMMIT.encode()
        for part in (0, 1):
            files[f"state/0/{part}/{n + 1}.delta"] = DELTA
            if n + 1 == snapshot_at:
                files[f"state/0/{part}/{n + 1}.snapshot"] = DELTA
    for name, data in files.items():
        store.write(f"{location}/{name}", data)


def test_a_healthy_checkpoint_is_left_alone(store: ObjectStore, bucket: str) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 4)
    before = store.list(location)
    assert CheckpointDir(store, location).repair(None) is None
    assert store.list(location) == before


def test_a_restart_checks_a_healthy_checkpoint_with_one_listing(s3_server: S3Server, bucket: str) -> None:
    """The check is on the takeover's path: the directory is listed once (not once per log and again for
    the rollback's clean-up), and each file the batch needs is read once."""
    client = s3_server.client()
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(ObjectStore(client), location, 4)
    requests: Counter[str] = Counter()
    client.meta.events.register("before-call.s3", lambda model, **_: requests.update([model.name]))
    assert CheckpointDir(ObjectStore(client), location).repair(None) is None
    # offsets/3, commits/3, offsets/2, each partition's state version 4, offsets/4 (kept if readable)
    assert requests == Counter({"ListObjectsV2": 1, "GetObject": 6})


def test_damaged_offsets_roll_back_one_batch_and_drop_its_source_log(store: ObjectStore, bucket: str) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 4)
    store.write(f"{location}/offsets/3", b"\x00\x01torn")
    rollback = CheckpointDir(store, location).repair(None)
    assert rollback is not None and (rollback.from_batch, rollback.to_batch) == (3, 2)
    assert "offsets/3 has no version header" in rollback.reason
    left = store.list(location)
    assert not {"commits/3", "offsets/3", "offsets/4", "sources/0/3", "sources/0/4"} & set(left)
    assert not {"state/0/0/4.delta", "state/0/1/4.delta"} & set(left)
    assert {"commits/2", "offsets/2", "sources/0/2", "state/0/0/3.delta"} <= set(left)


def test_damaged_state_keeps_the_readable_offsets_so_the_batch_reruns_them(
    store: ObjectStore, bucket: str
) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 4)
    store.write(f"{location}/state/0/1/4.delta", b"garbage")
    rollback = CheckpointDir(store, location).repair(None)
    assert rollback is not None and rollback.to_batch == 2
    assert "state/0/1/4.delta is not an LZ4 stream" in rollback.reason
    left = set(store.list(location))
    assert {"offsets/3", "sources/0/3"} <= left  # batch 3 runs again with exactly its logged offsets
    assert not {"commits/3", "offsets/4", "sources/0/4", "state/0/0/4.delta", "state/0/1/4.delta"} & left


def test_the_newest_state_files_are_checked_by_their_first_bytes(
    store: ObjectStore, s3_server: S3Server, bucket: str
) -> None:
    """Not read whole before every restart: task-local recovery is there so that the state is not fetched
    from S3 again (a zip, RocksDB's, is tested whole)."""
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 4)
    asked: list[tuple[str, int | None]] = []

    class Recording(ObjectStore):
        def read(self, uri: str, first: int | None = None) -> bytes | None:
            asked.append((uri.removeprefix(f"{location}/"), first))
            return super().read(uri, first)

    assert CheckpointDir(Recording(s3_server.client()), location).problems(3) == []
    assert {name: first for name, first in asked if name.startswith("state/")} == {
        "state/0/0/4.delta": 8,
        "state/0/1/4.delta": 8,
    }


def test_the_operators_restore_batch_bounds_the_rollback(store: ObjectStore, bucket: str) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 5)
    rollback = CheckpointDir(store, location).repair(2)
    assert rollback is not None and (rollback.from_batch, rollback.to_batch) == (4, 2)
    assert CheckpointDir(store, location).latest_commit() == 2


def test_no_restorable_batch_asks_for_a_manual_restore(store: ObjectStore, bucket: str) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 2)
    store.delete(f"{location}/state/0/0/1.delta")  # every version needs it: there is no snapshot
    with pytest.raises(CheckpointError, match="manual restore"):
        CheckpointDir(store, location).repair(None)


def test_savepoint_copies_what_the_batch_needs_and_restores_verified(store: ObjectStore, bucket: str) -> None:
    location = f"s3a://{bucket}/ck/q"
    _checkpoint(store, location, 6, snapshot_at=3)
    store.write(f"{location}/sources/0/2.compact", b"v1\n")
    target = f"s3://{bucket}/savepoints/sp"
    taken = savepoint.take(store, "sp", target, {"q": location}, "ns/job", "uid-1")
    assert taken.batches == {"q": 5}
    manifest = json.loads(store.read(f"{target}/_manifest.json") or b"")
    assert (manifest["job"], manifest["jobUid"]) == ("ns/job", "uid-1")
    # Never overwritten: not by the same job again, not by another one whose savepoint has the same id.
    before = store.list(target)
    for uid in ("uid-1", "uid-2"):
        with pytest.raises(SavepointError, match="never overwritten"):
            savepoint.take(store, "sp", target, {"q": location}, "ns/job", uid)
    assert store.list(target) == before
    files = set(manifest["queries"]["q"]["files"])
    # Version 6 = snapshot 3 + deltas 4..6; no file of the running batch 6.
    assert {
        f"state/0/{p}/{v}.{k}" for p in (0, 1) for v, k in [(3, "snapshot"), (4, "delta"), (6, "delta")]
    } <= files
    assert not {"state/0/0/2.delta", "state/0/0/3.delta", "offsets/6", "sources/0/6"} & files
    assert {
        "metadata",
        "offsets/4",
        "offsets/5",
        "commits/5",
        "sources/0/2.compact",
        "state/0/_metadata/schema",
    } <= files

    fork = f"s3a://{bucket}/other-job/q"
    assert savepoint.restore(store, target, "q", fork) == 5
    assert set(store.list(fork)) == files
    assert CheckpointDir(store, fork).repair(None) is None

    store.write(f"{target}/q/commits/5", b"changed")
    with pytest.raises(SavepointError, match="does not match"):
        savepoint.restore(store, target, "q", f"s3a://{bucket}/third/q")
    assert not CheckpointDir(store, f"s3a://{bucket}/third/q").has_metadata()  # metadata comes last
    with pytest.raises(SavepointError, match="no query 'other'"):
        savepoint.restore(store, target, "other", f"s3a://{bucket}/fourth/q")


def test_a_savepoint_that_fails_midway_leaves_nothing_on_storage(store: ObjectStore, bucket: str) -> None:
    """The second query has no committed batch: the first one's copy, done by then, is deleted again (the
    operator records a failed savepoint nowhere, so nobody would ever dispose of it)."""
    done, running = f"s3a://{bucket}/ck/done", f"s3a://{bucket}/ck/running"
    _checkpoint(store, done, 3)
    store.write(f"{running}/metadata", b'{"id":"r"}')
    target = f"s3://{bucket}/savepoints/failed"

    with pytest.raises(SavepointError, match="query running has no committed batch"):
        savepoint.take(store, "failed", target, {"done": done, "running": running}, "ns/job", "uid-1")

    assert store.list(target) == {}


def test_termination_message_stays_within_the_kubernetes_limit(tmp_path: Path) -> None:
    ending = Ending()
    assert ending.set(Exit.SCRIPT_FAILED, "ScriptFailed", "x" * 10_000)
    assert not ending.set(Exit.FINISHED, "Finished", "later endings do not count")
    ending.write_once(tmp_path / "msg", {"q": 3})
    text = (tmp_path / "msg").read_bytes()
    assert len(text) <= MAX_MESSAGE_BYTES
    document = json.loads(text)
    assert (document["reason"], document["exitCode"], document["lastCommitted"]) == (
        "ScriptFailed",
        1,
        {"q": 3},
    )


def test_the_termination_message_is_written_once_and_then_final(tmp_path: Path) -> None:
    """The watchdog's thread writes and exits while the main thread, woken by the JVM's death, ends too: a
    second write would truncate the file first, and the exit could land in between."""
    ending = Ending()
    ending.write_once(tmp_path / "msg", {"q": 1})
    first = (tmp_path / "msg").read_bytes()
    assert json.loads(first)["reason"] == ""

    assert not ending.set(Exit.NO_PROGRESS, "NoProgress", "an ending after the message is not taken")
    ending.write_once(tmp_path / "msg", {"q": 2})

    assert (tmp_path / "msg").read_bytes() == first
    assert (ending.code, ending.reason) == (Exit.FINISHED, "")


@pytest.mark.parametrize(
    ("env", "reason", "named"),
    [
        ({DriverEnv.PROTOCOL: str(PROTOCOL_VERSION + 1)}, "RuntimeMismatch", "ftspark"),
        (
            {DriverEnv.PROTOCOL: str(PROTOCOL_VERSION), DriverEnv.LOCAL_RECOVERY_JAR: "/nowhere/lr.jar"},
            "ImageIncomplete",
            "/nowhere/lr.jar",
        ),
    ],
    ids=["another release", "no local-recovery jar"],
)
def test_an_image_that_cannot_run_the_spec_ends_the_driver_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], reason: str, named: str
) -> None:
    """Before Spark starts: the pod's termination message, which the operator reads into the job's status,
    names what the image lacks (a cause no restart fixes)."""
    for name in [*DriverEnv]:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(RuntimeEnv.TERMINATION_LOG, str(tmp_path / "termination"))
    assert driver_main(["driver", "local:///job.py"]) == Exit.BAD_INPUT
    message = json.loads((tmp_path / "termination").read_text())
    assert message["reason"] == reason and named in message["message"], message
    assert reason in CONFIGURATION_CAUSES


def test_config_from_the_operators_environment() -> None:
    env = {
        "FTSPARK_PROTOCOL": str(PROTOCOL_VERSION),
        "FTSPARK_JOB": "team/orders",
        "FTSPARK_ATTEMPT": "4",
        "FTSPARK_POD_NAME": "orders-4-driver",
        "FTSPARK_CHECKPOINT_LOCATION": "s3://bucket/jobs/orders/checkpoints/abc-run-1/",
        "FTSPARK_RESTORE_BATCH": "17",
        "FTSPARK_SPARK_CONF": '{"spark.master": "local[2]"}',
        "FTSPARK_TERM_FLOOR": "ftspark-system/ftspark-operator-term",
        "FTSPARK_CHECKPOINT_KEY_FILE": "/etc/ftspark/checkpoint-key/checkpoint-key",
    }
    config = RuntimeConfig.from_env(env)
    assert (config.identity, config.restore_batch, config.storage) == (
        "orders-4-driver@4",
        17,
        "s3://bucket/jobs/orders",
    )
    with pytest.raises(ConfigError, match="FTSPARK_JOB"):
        RuntimeConfig.from_env({**env, "FTSPARK_JOB": "orders"})
    with pytest.raises(ConfigError, match="FTSPARK_SPARK_CONF"):
        RuntimeConfig.from_env({**env, "FTSPARK_SPARK_CONF": "{"})
    for floor in ("", "ftspark-operator-term", "a/b/c"):
        with pytest.raises(ConfigError, match="FTSPARK_TERM_FLOOR"):
            RuntimeConfig.from_env({**env, "FTSPARK_TERM_FLOOR": floor})
    # An operator of another release (or one before protocol versions) made the pod: said, never guessed.
    for spoken, said in (
        (str(PROTOCOL_VERSION + 1), f"protocol {PROTOCOL_VERSION + 1}"),
        ("", "no protocol"),
    ):
        with pytest.raises(ProtocolMismatchError, match=f"speaks {said}.*image protocol {PROTOCOL_VERSION}"):
            RuntimeConfig.from_env({**env, "FTSPARK_PROTOCOL": spoken})
