"""The HA store an installation chooses reaches its drivers: operator flags or environment → the driver pod's
environment → the driver runtime's configuration. Refused with the reason when it cannot work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ftspark.app.config import parse
from ftspark.domain.models import JobSpec
from ftspark.manifests import AttemptPlan, driver_pod
from ftspark.protocol import HaStoreConfig
from ftspark.runtime.config import ConfigError, RuntimeConfig

PLAN = AttemptPlan(
    "ns",
    "job",
    "0123456789ab",
    1,
    JobSpec.model_validate(
        {"image": "img:1", "mainApplicationFile": "local:///job.py", "checkpoint": {"storage": "s3://bkt/j"}}
    ),
    "s3://bkt/j/checkpoints/01234567-run-1",
    "nothing",
    term_floor="ftspark-system/ftspark-operator-term",
)


def driver_env(plan: AttemptPlan) -> dict[str, str]:
    env = driver_pod(plan)["spec"]["containers"][0]["env"]
    return {e["name"]: e["value"] for e in env if "value" in e} | {"FTSPARK_POD_NAME": "job-1-driver"}


def test_configmaps_by_default_everywhere() -> None:
    assert parse([]).ha() == HaStoreConfig()
    assert RuntimeConfig.from_env(driver_env(PLAN)).ha_store == HaStoreConfig(kind="configmaps")


def test_s3_from_the_flags_or_the_environment_reaches_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = parse(["--ha-store=s3", "--ha-s3-root=s3://ha-bucket/ftspark"]).ha()
    monkeypatch.setenv("FTSPARK_HA_STORE", "s3")
    monkeypatch.setenv("FTSPARK_HA_S3_ROOT", "s3://ha-bucket/ftspark")
    assert parse([]).ha() == flags == HaStoreConfig(kind="s3", s3_root="s3://ha-bucket/ftspark")
    assert RuntimeConfig.from_env(driver_env(replace(PLAN, ha_store=flags))).ha_store == flags


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--ha-store=s3"], "needs its root as s3://<bucket>/<prefix>"),
        (["--ha-store=s3", "--ha-s3-root=ha-bucket/ftspark"], "needs its root as s3://<bucket>/<prefix>"),
        (["--ha-store=s3", "--ha-s3-root=s3:///ftspark"], "needs its root as s3://<bucket>/<prefix>"),
        (["--ha-s3-root=s3://ha-bucket/ftspark"], "but the HA store is configmaps"),
        (["--ha-store=etcd"], "invalid choice: 'etcd'"),
        (["--watch-namespaces=jobs,kube-system"], "never manages kube-system"),
        (
            ["--namespace=ops", "--watch-namespaces=jobs,ops"],
            "--watch-namespaces: the operator never manages its own",
        ),
        (["--storage-prefixes=bucket/x"], "--storage-prefixes"),
        (["--checkpoint-refreshes-per-second=0"], "--checkpoint-refreshes-per-second: Input should be"),
    ],
)
def test_an_unusable_choice_stops_the_operator_with_the_reason(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse(argv)
    assert stopped.value.code == 2
    assert reason in capsys.readouterr().err


def test_an_unusable_choice_is_a_driver_config_error() -> None:
    env = driver_env(PLAN) | {"FTSPARK_HA_STORE": "s3", "FTSPARK_HA_S3_ROOT": ""}
    with pytest.raises(ConfigError, match="needs its root"):
        RuntimeConfig.from_env(env)
