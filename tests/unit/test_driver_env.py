"""Every FTSPARK_ variable the operator sets or the driver runtime reads is named in ftspark.protocol
(DriverEnv: what the operator sets; RuntimeEnv: the runtime's own settings): one place, no name drifts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ftspark.domain.ha import JobKey
from ftspark.domain.models import JobSpec
from ftspark.manifests import LOCAL_RECOVERY_JAR, AttemptPlan, driver_pod, spark_conf
from ftspark.protocol import HEALTH_PORT, DriverEnv, HaStoreConfig, RuntimeEnv
from ftspark.runtime.config import RuntimeConfig

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "ftspark"
_NAME = re.compile(r"FTSPARK_[A-Z_]+")
# The Spark image runs classdata.py before ftspark is installed: it imports nothing of ftspark, so it names
# its own two variables (FTSPARK_CLASS_DATA_DIR, which the image sets; the development cache's FTSPARK_CACHE).
STANDALONE = {PACKAGE / "runtime" / "classdata.py"}


def _spelled(path: Path) -> list[str]:
    """The FTSPARK_ names a module spells as a string of their own, outside docstrings and comments."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _NAME.fullmatch(node.value)
    ]


def test_the_driver_side_spells_no_variable_of_its_own() -> None:
    modules = [PACKAGE / "manifests.py", *sorted((PACKAGE / "runtime").glob("*.py"))]
    spelled = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in modules
        if path not in STANDALONE
        for name in _spelled(path)
    }
    assert spelled == set(), (
        "name these in ftspark.protocol (DriverEnv or RuntimeEnv) and use them from there"
    )


def test_the_check_finds_a_spelled_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Reads FTSPARK_DOC."""\nimport os\nX = os.environ.get("FTSPARK_SOMETHING")\n')
    assert _spelled(module) == ["FTSPARK_SOMETHING"]


def test_every_name_is_one_variable() -> None:
    values = [member.value for member in (*DriverEnv, *RuntimeEnv)]
    assert len(values) == len(set(values))


def test_what_the_pod_sets_the_runtime_reads_back_as_the_operator_meant_it(tmp_path: Path) -> None:
    """manifests.driver_pod writes the driver's environment, RuntimeConfig.from_env reads it: every value
    the operator sets arrives with its meaning (a round trip), and the runtime reads each of them."""
    spec = JobSpec.model_validate(
        {
            "image": "img:1",
            "mainApplicationFile": "local:///job.py",
            "checkpoint": {"storage": "s3://bkt/j", "retained": 7},
            "stopTimeoutSeconds": 33,
            "liveness": {"progressTimeoutSeconds": 44},
            "initialSavepoint": "s3://bkt/j/savepoints/sp-1",
            "localRecovery": {"enabled": True},
        }
    )
    plan = AttemptPlan(
        "ns",
        "job",
        "0123456789ab",
        3,
        spec,
        "s3://bkt/j/checkpoints/01234567-run-3",
        "latest-checkpoint",
        restore_batch_id=41,
        ha_store=HaStoreConfig(kind="s3", s3_root="s3://ha/ftspark"),
        term_floor="ops/ftspark-term-floor",
        standby=True,
        standby_executors=2,
        spec_hash="abc",
    )
    (container,) = driver_pod(plan)["spec"]["containers"]
    by_reference = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e
    }
    assert by_reference == {DriverEnv.POD_NAME: "metadata.name", DriverEnv.BIND_ADDRESS: "status.podIP"}
    kubelet = {DriverEnv.POD_NAME: "job-3-driver", DriverEnv.BIND_ADDRESS: "10.0.0.7"}
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e} | kubelet
    assert env[DriverEnv.LOCAL_RECOVERY_JAR] == LOCAL_RECOVERY_JAR  # read where the JVM starts (session.py)
    jar = tmp_path / "ftspark-local-recovery.jar"  # the image's, which this machine lacks
    jar.touch()
    config = RuntimeConfig.from_env(env | {DriverEnv.LOCAL_RECOVERY_JAR: str(jar)})
    assert (config.job, config.job_uid, config.attempt) == (
        JobKey(namespace="ns", name="job"),
        "0123456789ab",
        3,
    )
    assert (config.pod_name, config.bind_address) == ("job-3-driver", "10.0.0.7")
    assert config.checkpoint_root == plan.checkpoint_location and config.storage == "s3://bkt/j"
    assert (config.restore_batch, config.initial_savepoint) == (41, "s3://bkt/j/savepoints/sp-1")
    assert (config.retained_checkpoints, config.stop_timeout, config.progress_timeout) == (7, 33.0, 44.0)
    assert config.spark_conf == spark_conf(plan)
    assert config.ha_store == plan.ha_store and config.term_floor == ("ops", "ftspark-term-floor")
    assert config.checkpoint_key_file == Path("/etc/ftspark/checkpoint-key/checkpoint-key")
    assert (config.health_port, config.standby, config.standby_executors) == (HEALTH_PORT, True, 2)
    # The restore decision is there for whoever reads the pod; the runtime restores from what exists.
    assert env[DriverEnv.RESTORE_FROM] == "latest-checkpoint"
    assert set(env) == {*DriverEnv}, "every name the operator sets, and no other"
