"""The job policy: every field it refuses, named as the user wrote it; allowances; what stays allowed.

HOSTILE is also run through the API server's admission (tests/integration/test_policy.py): both must agree."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.app.config import parse
from ftspark.domain.models import JobSpec
from ftspark.domain.policy import ALLOWANCES, RULES, namespace_allowances, storage_within, violations

BASE: dict[str, Any] = {
    "image": "img",
    "mainApplicationFile": "local:///job.py",
    "checkpoint": {"storage": "s3://bucket/job"},
}


def _pod(role: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {role: {"podTemplate": pod}}


def _container(role: str, security: dict[str, Any], kind: str = "containers") -> dict[str, Any]:
    return _pod(role, {"spec": {kind: [{"name": "c", "securityContext": security}]}})


_SECURITY: list[tuple[dict[str, Any], str, str]] = [
    ({"privileged": True}, "privileged", "privileged"),
    ({"allowPrivilegeEscalation": True}, "allowPrivilegeEscalation", "privileged"),
    ({"capabilities": {"add": ["SYS_ADMIN"]}}, "capabilities.add", "capabilities"),
]

# (spec fields, the field refused, the allowance that admits it or None)
HOSTILE: list[tuple[dict[str, Any], str, str | None]] = [
    *(
        (
            _pod(
                role,
                {
                    "spec": {
                        kind: [
                            {"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "FTSPARK_ATTEMPT"}]}
                        ]
                    }
                },
            ),
            f"{role}.podTemplate.spec.{kind}[0].env[1].name",
            None,
        )
        for role in ("driver", "executor")
        for kind in ("containers", "initContainers", "ephemeralContainers")
    ),
    ({"env": [{"name": "FTSPARK_SPARK_CONF", "value": "{}"}]}, "env[0].name", None),
    # Secrets in plain text (they would land in the driver pod and the job graph): refused, never allowed.
    *(
        (
            _pod(
                role, {"spec": {kind: [{"name": "c", "env": [{"name": "DB_PASSWORD", "value": "hunter2"}]}]}}
            ),
            f"{role}.podTemplate.spec.{kind}[0].env[0]",
            None,
        )
        for role in ("driver", "executor")
        for kind in ("containers", "initContainers", "ephemeralContainers")
    ),
    ({"env": [{"name": "A", "value": "1"}, {"name": "AWS_SECRET_ACCESS_KEY", "value": "k"}]}, "env[1]", None),
    (
        {"sparkConf": {"spark.hadoop.fs.s3a.secret.key": "k"}},
        'sparkConf["spark.hadoop.fs.s3a.secret.key"]',
        None,
    ),
    *(
        (
            _pod(role, {"spec": {kind: [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}}),
            f"{role}.podTemplate.spec.{kind}[0].ports[0].hostPort",
            "hostNetwork",
        )
        for role in ("driver", "executor")
        for kind in ("containers", "initContainers", "ephemeralContainers")
    ),
    *(
        (
            _container(role, security, kind),
            f"{role}.podTemplate.spec.{kind}[0].securityContext.{field}",
            allowance,
        )
        for role in ("driver", "executor")
        for kind in ("containers", "initContainers", "ephemeralContainers")
        for security, field, allowance in _SECURITY
    ),
    *(
        case
        for role in ("driver", "executor")
        for case in [
            (
                _pod(role, {"spec": {"serviceAccountName": "admin"}}),
                f"{role}.podTemplate.spec.serviceAccountName",
                "serviceAccount",
            ),
            (
                _pod(role, {"spec": {"serviceAccount": "admin"}}),
                f"{role}.podTemplate.spec.serviceAccount",
                "serviceAccount",
            ),
            (
                _pod(role, {"spec": {"automountServiceAccountToken": True}}),
                f"{role}.podTemplate.spec.automountServiceAccountToken",
                "serviceAccount",
            ),
            (
                _pod(role, {"spec": {"hostNetwork": True}}),
                f"{role}.podTemplate.spec.hostNetwork",
                "hostNetwork",
            ),
            (_pod(role, {"spec": {"hostPID": True}}), f"{role}.podTemplate.spec.hostPID", "hostPID"),
            (_pod(role, {"spec": {"hostIPC": True}}), f"{role}.podTemplate.spec.hostIPC", "hostIPC"),
            (_pod(role, {"spec": {"nodeName": "node-1"}}), f"{role}.podTemplate.spec.nodeName", "nodeName"),
            (
                _pod(
                    role,
                    {"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"operator": "Exists"}]}},
                ),
                f"{role}.podTemplate.spec.tolerations[1]",
                "tolerations",
            ),
            (
                _pod(role, {"spec": {"volumes": [{"name": "k", "hostPath": {"path": "/var/lib/kubelet"}}]}}),
                f"{role}.podTemplate.spec.volumes[0].hostPath",
                "hostPath",
            ),
            (
                _pod(role, {"metadata": {"labels": {"ftspark.io/job": "other"}}}),
                f'{role}.podTemplate.metadata.labels["ftspark.io/job"]',
                None,
            ),
            (
                _pod(role, {"metadata": {"labels": {"spark-app-selector": "spark-x"}}}),
                f'{role}.podTemplate.metadata.labels["spark-app-selector"]',
                None,
            ),
            (
                _pod(role, {"metadata": {"labels": {"spark-role": "driver"}}}),
                f'{role}.podTemplate.metadata.labels["spark-role"]',
                None,
            ),
            (
                _pod(role, {"metadata": {"annotations": {"ftspark.io/control": "stop@now"}}}),
                f'{role}.podTemplate.metadata.annotations["ftspark.io/control"]',
                None,
            ),
            (
                {"sparkConf": {f"spark.kubernetes.{role}.volumes.hostPath.x.mount.path": "/host"}},
                f'sparkConf["spark.kubernetes.{role}.volumes.hostPath.x.mount.path"]',
                "hostPath",
            ),
            (
                {"sparkConf": {f"spark.kubernetes.{role}.label.ftspark.io/job": "other"}},
                f'sparkConf["spark.kubernetes.{role}.label.ftspark.io/job"]',
                None,
            ),
            (
                {"sparkConf": {f"spark.kubernetes.{role}.podTemplateFile": "/opt/pod.yaml"}},
                f'sparkConf["spark.kubernetes.{role}.podTemplateFile"]',
                None,
            ),
            (
                {"sparkConf": {f"spark.kubernetes.{role}.pod.featureSteps": "x.Step"}},
                f'sparkConf["spark.kubernetes.{role}.pod.featureSteps"]',
                None,
            ),
        ]
    ),
    (
        {"sparkConf": {"spark.kubernetes.executor.annotation.ftspark.io/control": "stop@now"}},
        'sparkConf["spark.kubernetes.executor.annotation.ftspark.io/control"]',
        None,
    ),
    (
        {"sparkConf": {"spark.kubernetes.executor.label.spark-role": "driver"}},
        'sparkConf["spark.kubernetes.executor.label.spark-role"]',
        None,
    ),
    (
        {"sparkConf": {"spark.kubernetes.authenticate.executor.serviceAccountName": "admin"}},
        'sparkConf["spark.kubernetes.authenticate.executor.serviceAccountName"]',
        "serviceAccount",
    ),
    (
        {"sparkConf": {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}},
        'sparkConf["spark.kubernetes.authenticate.driver.serviceAccountName"]',
        "serviceAccount",
    ),
    (
        {"sparkConf": {"spark.authenticate": "false"}},
        'sparkConf["spark.authenticate"]',
        None,
    ),
    (
        {"localRecovery": {"enabled": True, "hostPath": "/var/lib/kubelet"}},
        "localRecovery.hostPath",
        "hostPath",
    ),
]

# What a pod's author may write anyway, and the operator's own parts: never refused.
HARMLESS: list[dict[str, Any]] = [
    {},
    {
        "env": [
            {"name": "FTSPARK_LEASE_DURATION", "value": "3"},
            {"name": "FTSPARK_LOCAL_RECOVERY_JAR", "value": "/j"},
        ]
    },
    {"localRecovery": {"enabled": True}},  # the operator's hostPath at its default directory
    _pod("driver", {"metadata": {"labels": {"team": "a", "app.kubernetes.io/name": "x"}}}),
    _pod(
        "executor",
        {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}], "nodeSelector": {"a": "b"}}},
    ),
    _pod("executor", {"spec": {"automountServiceAccountToken": False, "hostNetwork": False}}),
    _container(
        "driver", {"privileged": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    ),
    _container("executor", {"capabilities": {"add": []}}),
    _pod("executor", {"spec": {"volumes": [{"name": "s", "secret": {"secretName": "s3"}}]}}),
    {
        "sparkConf": {
            "spark.executor.memoryOverhead": "1g",
            "spark.kubernetes.executor.volumes.emptyDir.x.mount.path": "/x",
        }
    },
    {"sparkConf": {"spark.kubernetes.executor.label.team": "a", "spark.kubernetes.container.image": "img:2"}},
    # Secrets by reference: the Secret's name and key, never its value.
    {
        "env": [{"name": "AWS_SECRET_ACCESS_KEY", "secretKeyRef": {"name": "s3", "key": "secret"}}],
        "sparkConf": {
            "spark.kubernetes.executor.secrets.s3": "/etc/s3",
            "spark.kubernetes.driver.secretKeyRef.TOKEN": "api:token",
            "spark.hadoop.fs.s3a.aws.credentials.provider": "com.example.EnvironmentCredentials",
        },
    },
    {
        "sparkConf": {
            "spark.kubernetes.executor.label.spark-role-x": "a",
            "spark.kubernetes.executor.annotation.a": "b",
        }
    },
]


def _spec(fields: dict[str, Any]) -> JobSpec:
    return JobSpec.model_validate({**BASE, **fields})


@pytest.mark.parametrize(("fields", "field", "allowance"), HOSTILE, ids=[case[1] for case in HOSTILE])
def test_each_field_is_refused_by_name_unless_its_allowance_is_granted(
    fields: dict[str, Any], field: str, allowance: str | None
) -> None:
    (refused,) = violations(_spec(fields))
    assert refused.field == f"spec.{field}"
    assert refused.message.startswith(f"spec.{field}: ")
    assert refused.rule.allowance == allowance
    others = [a for a in ALLOWANCES if a != allowance]
    assert violations(_spec(fields), others), "another allowance does not help"
    assert violations(_spec(fields), ALLOWANCES) == ([] if allowance else [refused]), "none for ftspark's own"
    if allowance:
        assert f"allow.ftspark.io/{allowance}=true" in refused.message


@pytest.mark.parametrize("fields", HARMLESS)
def test_what_a_pod_author_may_write_anyway_passes(fields: dict[str, Any]) -> None:
    assert violations(_spec(fields)) == []


def test_every_rule_has_a_hostile_case() -> None:
    covered = {
        (rule.field, rule.test) for fields, _, _ in HOSTILE for rule in [violations(_spec(fields))[0].rule]
    }
    assert covered == {(rule.field, rule.test) for rule in RULES}


def test_every_field_is_named_when_several_are_set() -> None:
    spec = _spec(
        {
            "driver": {"podTemplate": {"spec": {"hostNetwork": True, "hostPID": True}}},
            "sparkConf": {"spark.kubernetes.executor.volumes.hostPath.a.mount.path": "/a"},
        }
    )
    assert [v.field for v in violations(spec, {"hostPID"})] == [
        "spec.driver.podTemplate.spec.hostNetwork",
        'spec.sparkConf["spark.kubernetes.executor.volumes.hostPath.a.mount.path"]',
    ]


def test_a_namespace_grants_allowances_with_labels_set_to_true() -> None:
    labels = {
        "allow.ftspark.io/hostPath": "true",
        "allow.ftspark.io/hostNetwork": "false",
        "kubernetes.io/metadata.name": "jobs",
    }
    assert namespace_allowances(labels) == {"hostPath"}


def test_the_operator_grants_allowances_by_name_and_refuses_unknown_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse(["--allow", "hostPath, nodeName"]).allow == {"hostPath", "nodeName"}
    assert parse([]).allow == frozenset()
    with pytest.raises(SystemExit):
        parse(["--allow", "root"])
    assert "Input should be 'serviceAccount'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "storage", ["s3://bucket/a/../b", "s3://bucket/./a", "s3://bucket//a", "s3://bucket/a/.."]
)
def test_a_storage_with_a_dot_or_empty_segment_is_refused(storage: str) -> None:
    """Hadoop normalizes such a URI to another prefix than the one every ownership check compared."""
    with pytest.raises(ValidationError) as refused:
        _spec({"checkpoint": {"storage": storage}})
    assert [error["loc"] for error in refused.value.errors()] == [("checkpoint", "storage")]
    assert _spec({"checkpoint": {"storage": "s3://bucket/a/..b/.c/"}})  # dots inside a name are fine


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.driver.memoryOverhead", "lots"),
        ("spark.driver.memoryOverhead", ""),
        ("spark.driver.minMemoryOverhead", "gb"),
        ("spark.driver.memoryOverheadFactor", "x"),
        ("spark.kubernetes.memoryOverheadFactor", "nan"),
        ("spark.kubernetes.driver.request.cores", "half"),
        ("spark.kubernetes.driver.request.cores", "0m"),
        ("spark.kubernetes.executor.request.cores", "1.5 "),
    ],
)
def test_a_spark_setting_the_operator_reads_itself_is_refused_unless_it_reads(key: str, value: str) -> None:
    """It sizes the driver pod from them: a value it cannot read would fail every reconcile of the job."""
    with pytest.raises(ValidationError) as refused:
        _spec({"sparkConf": {key: value}})
    (error,) = refused.value.errors()
    assert error["loc"] == ("sparkConf",) and key in error["msg"]
    assert _spec(
        {"sparkConf": {"spark.driver.memoryOverhead": "512m", "spark.driver.memoryOverheadFactor": "0.2"}}
    )
    assert _spec(
        {"sparkConf": {f"spark.kubernetes.{role}.request.cores": "0.5" for role in ("driver", "executor")}}
    )


def test_a_storage_prefix_holds_itself_and_below_it_at_a_path_segment() -> None:
    """The rule the operator and the chart's admission policy both apply (tests/integration/test_policy.py
    runs these cases through the API server)."""
    assert storage_within("s3://b/team", ["s3://b/team"])
    assert storage_within("s3a://b/team/x/", ["s3://b/team/"])
    assert storage_within("s3://b/team/x", ["s3a://b/team"])
    assert not storage_within("s3://b/team-x", ["s3://b/team"])
    assert not storage_within("s3://b/tea", ["s3://b/team"])
    assert not storage_within("s3://c/team", ["s3://b/team", "s3://b"])
    assert storage_within("s3://anywhere/x", []), "no prefix: anywhere"
