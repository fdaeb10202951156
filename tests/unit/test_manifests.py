"""The driver attempt's manifests: what reaches Spark, the driver and the executors."""

from __future__ import annotations

import base64
import json
import posixpath
import re
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from ftspark.domain.models import (
    CHANGELOG_CHECKPOINTING_KEY,
    STATE_STORE_PROVIDER_KEY,
    JobSpec,
    UiIngressSpec,
)
from ftspark.manifests import (
    DRIVER_RULES,
    AttemptKeys,
    AttemptPlan,
    attempt_objects,
    attempt_secret,
    driver_network_policy,
    driver_pod,
    executor_admission_probe,
    executor_pod_template,
    local_recovery_secret,
    local_state_claim,
    local_state_volume,
    spark_conf,
    ui_objects,
    ui_url,
)
from ftspark.protocol import HEALTH_PORT, READY_PATH, SERVING_LABEL, SPEC_HASH_LABEL, STANDBY_LABEL, DriverEnv
from ftspark.reconcile.settings import JobDefaults


def plan(**spec: object) -> AttemptPlan:
    job = JobSpec.model_validate(
        {
            "image": "img:1",
            "mainApplicationFile": "local:///job.py",
            "checkpoint": {"storage": "s3://bkt/j"},
            **spec,
        }
    )
    return AttemptPlan(
        "ns", "job", "0123456789ab", 3, job, "s3://bkt/j/checkpoints/01234567-run-3", "latest-checkpoint"
    )


def test_an_attempt_is_one_ordered_value_each_object_in_its_namespace() -> None:
    keys = AttemptKeys(rpc=b"rpc", checkpoint=b"checkpoint", local_recovery=b"mac")
    attempt = replace(plan(localRecovery={"enabled": True}), term_floor="ops/ftspark-term-floor")
    objects = attempt_objects(attempt, keys)
    kinds = [(m["kind"], m["metadata"]["namespace"], m["metadata"]["name"]) for m in objects.attempt]
    assert kinds == [
        ("Secret", "ns", "job-3-driver-rpc"),
        ("NetworkPolicy", "ns", "job-3-driver"),
        ("Pod", "ns", "job-3-driver"),
    ], "what the pod mounts, and the policy in front of it, before the pod"
    identity = {(m["kind"], m["metadata"]["namespace"], m["metadata"]["name"]): m for m in objects.identity}
    assert set(identity) == {
        ("ServiceAccount", "ns", "ftspark-driver"),
        ("Role", "ns", "ftspark-driver"),
        ("RoleBinding", "ns", "ftspark-driver"),
        ("Role", "ops", "ftspark-driver-term-floor"),
        ("RoleBinding", "ops", "ftspark-driver-term-floor-ns"),
    }
    assert identity[("Role", "ns", "ftspark-driver")]["rules"] == list(DRIVER_RULES)
    (floor_rule,) = identity[("Role", "ops", "ftspark-driver-term-floor")]["rules"]
    assert floor_rule["resourceNames"] == ["ftspark-term-floor"] and floor_rule["verbs"] == ["get"]
    drivers = [{"kind": "ServiceAccount", "name": "ftspark-driver", "namespace": "ns"}]
    assert all(m["subjects"] == drivers for m in objects.identity if m["kind"] == "RoleBinding")
    assert objects.admission_probe is not None and objects.admission_probe["metadata"]["namespace"] == "ns"
    claim, job_secret = objects.job_objects
    assert claim["kind"] == "PersistentVolumeClaim" and claim["metadata"]["namespace"] == "ns"
    assert base64.b64decode(job_secret["data"]["key"]) == b"mac"
    assert objects.local_state_volume is not None
    assert "namespace" not in objects.local_state_volume["metadata"], "a PersistentVolume is cluster-scoped"
    secret = objects.attempt[0]["data"]
    assert (
        base64.b64decode(secret["secret"]) == b"rpc"
        and base64.b64decode(secret["checkpoint-key"]) == b"checkpoint"
    )

    without = attempt_objects(plan(), keys)
    assert (without.admission_probe, without.local_state_volume, without.job_objects) == (None, None, ()), (
        "only localRecovery needs them"
    )


def test_driver_pods_that_want_a_disruption_budget_are_selected_by_their_namespaces_one() -> None:
    keys = AttemptKeys(rpc=b"rpc", checkpoint=b"checkpoint", local_recovery=b"mac")
    defaults = JobDefaults(driver_disruption_budget=True)
    protected = attempt_objects(replace(plan(), spec=defaults.applied_to(plan().spec)), keys)
    budget, pod = protected.drivers_budget, protected.attempt[-1]
    assert budget is not None
    assert [m["kind"] for m in protected.attempt] == ["Secret", "NetworkPolicy", "Pod"], "no budget per pod"
    assert budget["metadata"]["namespace"] == pod["metadata"]["namespace"]
    assert "ownerReferences" not in budget["metadata"], "it serves every job of the namespace"
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert (budget["spec"]["maxUnavailable"], budget["spec"]["unhealthyPodEvictionPolicy"]) == (
        0,
        "AlwaysAllow",
    ), "no eviction of a running driver; one not Ready (starting) loses nothing"
    standby = attempt_objects(replace(plan(), spec=defaults.applied_to(plan().spec), standby=True), keys)
    assert (
        budget["spec"]["selector"]["matchLabels"].items() <= standby.attempt[-1]["metadata"]["labels"].items()
    )
    opted_out_spec = defaults.applied_to(plan(driver={"disruptionBudget": False}).spec)
    assert not opted_out_spec.driver.disruption_budget, "off per job"
    opted_out = attempt_objects(replace(plan(), spec=opted_out_spec), keys)
    assert opted_out.drivers_budget is None
    assert (
        not budget["spec"]["selector"]["matchLabels"].items()
        <= opted_out.attempt[-1]["metadata"]["labels"].items()
    )
    unwatched = JobDefaults(driver_disruption_budget=False)
    assert not unwatched.applied_to(plan(driver={"disruptionBudget": True}).spec).driver.disruption_budget, (
        "no budget where nodes are not watched: it would hold a drain off for ever"
    )


def test_spark_runs_in_client_mode_against_the_cluster_with_stable_names() -> None:
    conf = spark_conf(plan())
    assert conf["spark.master"] == "k8s://https://kubernetes.default.svc"
    assert conf["spark.kubernetes.driver.pod.name"] == "job-3-driver"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "job-3"
    assert conf["spark.app.id"] == "ftspark-01234567-3"
    assert conf["spark.kubernetes.executor.label.ftspark.io/job"] == "job", "leftovers are found by it"
    assert conf["spark.sql.streaming.checkpointLocation"] == "s3://bkt/j/checkpoints/01234567-run-3"


def test_env_py_files_and_user_conf_reach_spark() -> None:
    conf = spark_conf(
        plan(
            env=[{"name": "MODE", "value": "prod"}],
            pyFiles=["s3://bkt/lib.zip"],
            sparkConf={"spark.sql.shuffle.partitions": "4"},
        )
    )
    assert conf["spark.executorEnv.MODE"] == "prod"
    assert conf["spark.submit.pyFiles"] == "s3://bkt/lib.zip"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    driver_env = {
        e["name"]: e.get("value")
        for e in driver_pod(plan(env=[{"name": "MODE", "value": "prod"}]))["spec"]["containers"][0]["env"]
    }
    assert driver_env["MODE"] == "prod"


def test_state_snapshots_come_sooner_than_sparks_default_unless_the_job_says_otherwise() -> None:
    """A restart replays the delta files after a partition's newest snapshot: fewer of them, a shorter one."""
    conf = spark_conf(plan())
    assert conf["spark.sql.streaming.stateStore.maintenanceInterval"] == "15s"  # Spark's: 60s
    assert conf["spark.sql.streaming.stateStore.minDeltasForSnapshot"] == "5"  # Spark's: 10
    larger = {"spark.sql.streaming.stateStore.maintenanceInterval": "120s"}
    assert spark_conf(plan(sparkConf=larger))["spark.sql.streaming.stateStore.maintenanceInterval"] == "120s"


def test_env_from_a_secret_reaches_driver_and_executors_without_its_value() -> None:
    secret = {"name": "AWS_SECRET_ACCESS_KEY", "secretKeyRef": {"name": "s3", "key": "secret"}}
    attempt = plan(env=[secret])
    conf = spark_conf(attempt)
    assert conf["spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY"] == "s3:secret"
    assert "spark.executorEnv.AWS_SECRET_ACCESS_KEY" not in conf
    driver_env = {e["name"]: e for e in driver_pod(attempt)["spec"]["containers"][0]["env"]}
    assert driver_env["AWS_SECRET_ACCESS_KEY"] == {
        "name": "AWS_SECRET_ACCESS_KEY",
        "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}},
    }
    with pytest.raises(ValidationError, match="either value or secretKeyRef"):
        plan(env=[{**secret, "value": "plain"}])


def test_executor_pod_template_is_mounted_and_named_to_spark() -> None:
    template: dict[str, Any] = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"tolerations": [{"key": "spot", "operator": "Exists"}]},
    }
    attempt = plan(executor={"podTemplate": template})
    stored = _executor_template(attempt)
    assert stored["spec"]["tolerations"] == template["spec"]["tolerations"]
    pod = driver_pod(attempt)
    mount = pod["spec"]["containers"][0]["volumeMounts"][0]
    assert (
        spark_conf(attempt)["spark.kubernetes.executor.podTemplateFile"]
        == f"{mount['mountPath']}/pod-template.json"
    )
    # The attempt's Secret holds it (one object fewer per attempt); its directory holds that file alone.
    assert pod["spec"]["volumes"][0]["secret"] == {
        "secretName": "job-3-driver-rpc",
        "items": [{"key": "pod-template.json", "path": "pod-template.json"}],
    }


def _executor_template(attempt: AttemptPlan) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(
        base64.b64decode(attempt_secret(attempt, b"key", b"checkpoint-key")["data"]["pod-template.json"])
    )
    return stored


def test_drivers_and_executors_meet_pod_security_restricted_unless_the_template_says_otherwise() -> None:
    restricted_pod = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        # A volume a provisioner made root's is the Spark group's (185) and writable by it.
        "fsGroup": 185,
        "fsGroupChangePolicy": "OnRootMismatch",
    }
    restricted_container = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    attempt = plan()
    driver = driver_pod(attempt)
    executor = _executor_template(attempt)
    for pod in (driver, executor):
        assert pod["spec"]["securityContext"] == restricted_pod
        container = pod["spec"]["containers"][0]
        assert container["securityContext"] == restricted_container
        # What Spark writes under a read-only root: /tmp and the working directory, on emptyDirs.
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts["/tmp"]]["emptyDir"] == {}
        assert volumes[mounts[container["workingDir"]]]["emptyDir"] == {}
    assert executor["spec"]["containers"][0]["name"] == "executor"  # Spark takes the first container

    loosened = plan(executor={"podTemplate": {"spec": {"securityContext": {"runAsNonRoot": False}}}})
    assert executor_pod_template(loosened)["spec"]["securityContext"]["runAsNonRoot"] is False


def test_driver_pod_template_merges_over_the_operators_pod() -> None:
    attempt = plan(
        driver={
            "podTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "containers": [
                        {"name": "driver", "env": [{"name": "EXTRA", "value": "1"}]},
                        {"name": "sidecar", "image": "s"},
                    ],
                    "tolerations": [{"key": "spot", "operator": "Exists"}],
                },
            }
        }
    )
    pod = driver_pod(attempt)
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["metadata"]["labels"]["ftspark.io/job"] == "job"
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert containers["driver"]["command"] == ["python", "-m", "ftspark.runtime", "driver"]
    assert {"name": "EXTRA", "value": "1"} in containers["driver"]["env"]
    assert any(e["name"] == "FTSPARK_ATTEMPT" for e in containers["driver"]["env"])
    assert containers["sidecar"]["image"] == "s"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_local_recovery_template_mounts_the_node_dir_and_prefers_the_old_nodes() -> None:
    attempt = replace(
        plan(localRecovery={"enabled": True, "hostPath": "/mnt/state"}), local_state_nodes=("n1", "n2")
    )
    template = executor_pod_template(attempt)
    [volume] = [v for v in template["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert volume["name"].startswith("spark-local-dir-"), "Spark uses it as the executor's local dir"
    assert volume["persistentVolumeClaim"] == {"claimName": "job-local-state-01234567"}
    # No hostPath in the pod (Pod Security admits one only at "privileged"): the claim's volume has it.
    assert _host_paths(template) == [] and _node_dirs(attempt, template) == [
        "/mnt/state/jobs/ns/0123456789ab"
    ]
    assert local_state_volume(attempt)["spec"]["hostPath"]["type"] == "DirectoryOrCreate"
    mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert mounts[volume["name"]] == "/mnt/state/jobs/ns/0123456789ab"
    # The kubelet makes the directory root's 0755: an init step opens it (only it) to the executor's user.
    (opener,) = template["spec"]["initContainers"]
    assert opener["command"] == ["chmod", "1777", "/mnt/state/jobs/ns/0123456789ab"]
    assert opener["volumeMounts"] == [
        {"name": volume["name"], "mountPath": "/mnt/state/jobs/ns/0123456789ab"}
    ]
    context = opener["securityContext"]
    assert (context["runAsUser"], context["capabilities"], context["allowPrivilegeEscalation"]) == (
        0,
        {"drop": ["ALL"]},
        False,
    )
    assert "initContainers" not in executor_pod_template(plan())["spec"], "only with localRecovery"
    preferred = template["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred[0]["preference"]["matchExpressions"][0]["values"] == ["n1", "n2"]

    strict = replace(plan(localRecovery={"enabled": True, "affinity": "required"}), local_state_nodes=("n1",))
    required = executor_pod_template(strict)
    terms = required["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["n1"]
    assert "affinity" not in executor_pod_template(plan(localRecovery={"enabled": True}))["spec"]


def test_local_recovery_puts_the_filesystem_wrapper_in_front_of_s3a() -> None:
    attempt = plan(localRecovery={"enabled": True, "hostPath": "/mnt/state"})
    conf = spark_conf(attempt)
    assert conf["spark.hadoop.fs.s3a.impl"] == "io.ftspark.localrecovery.LocalRecoveryFileSystem"
    assert (
        conf["spark.hadoop.fs.ftspark.local-recovery.delegate.impl"]
        == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    )
    assert conf["spark.hadoop.fs.ftspark.local-recovery.dir"] == "/mnt/state/jobs/ns/0123456789ab/state"
    env = {e["name"]: e.get("value") for e in driver_pod(attempt)["spec"]["containers"][0]["env"]}
    assert env["FTSPARK_LOCAL_RECOVERY_JAR"].endswith("ftspark-local-recovery.jar")
    assert "spark.hadoop.fs.s3a.impl" not in spark_conf(plan())


def _host_paths(template: dict[str, Any]) -> list[str]:
    return [v["hostPath"]["path"] for v in template["spec"]["volumes"] if "hostPath" in v]


def _node_dirs(attempt: AttemptPlan, template: dict[str, Any]) -> list[str]:
    """The node directories the template's claims reach: the job's local-state claim, through the volume
    pre-bound to it and to it alone."""
    volume, claim = local_state_volume(attempt), local_state_claim(attempt)
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    bound = volume["spec"]["claimRef"]
    assert (bound["namespace"], bound["name"]) == (attempt.namespace, claim["metadata"]["name"])
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in template["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == [claim["metadata"]["name"]]
    return [volume["spec"]["hostPath"]["path"]]


@pytest.mark.parametrize("root", ["/mnt/../etc", "/mnt//state", "/mnt/./state"])
def test_a_root_that_names_a_directory_two_ways_is_refused(root: str) -> None:
    """Before any volume is made of it: the API server refuses ".." in a PersistentVolume's path, and "." or
    an empty segment would give two jobs' roots one directory."""
    with pytest.raises(ValidationError, match="or empty segments"):
        plan(localRecovery={"enabled": True, "hostPath": root})


def test_local_state_volume_is_retained_cluster_scoped_and_labelled_with_its_job() -> None:
    """What the operator's sweep needs to find a deleted job's volume (no owner reference can reach a
    cluster-scoped object from a namespaced one), and the claim that goes with the job."""
    attempt = plan(localRecovery={"enabled": True, "hostPath": "/mnt/state"})
    volume, claim = local_state_volume(attempt), local_state_claim(attempt)
    assert volume["metadata"]["name"] == "ftspark-local-state-0123456789ab"
    assert volume["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "ftspark",
        "ftspark.io/job": "job",
        "ftspark.io/namespace": "ns",
    }
    assert "ownerReferences" not in volume["metadata"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "0123456789ab"
    # No StorageClass on either side: the default class's provisioner never takes the claim.
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""


def test_local_recovery_gives_each_job_only_its_own_node_directory() -> None:
    """Job B's executors on the node mount B's directory, never the root or A's: A's copies are invisible."""
    job_a = plan(localRecovery={"enabled": True, "hostPath": "/mnt/state"})
    job_b = replace(job_a, namespace="tenant-b", job_name="other", job_uid="fedcba987654")
    mounted = {}
    for attempt in (job_a, job_b):
        template = executor_pod_template(attempt)
        [host_path] = _node_dirs(attempt, template)
        mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
        local_dir = spark_conf(attempt)["spark.hadoop.fs.ftspark.local-recovery.dir"]
        assert host_path == f"/mnt/state/jobs/{attempt.namespace}/{attempt.job_uid}"
        # The copies live inside the one node directory the executor sees.
        assert posixpath.dirname(local_dir) == mounts["spark-local-dir-ftspark"] == host_path
        mounted[attempt.job_uid] = host_path
    a, b = mounted.values()
    assert not (a + "/").startswith(b + "/") and not (b + "/").startswith(a + "/")


def test_local_recovery_settings_are_the_operators_not_the_users() -> None:
    attempt = plan(
        localRecovery={"enabled": True, "hostPath": "/mnt/state"},
        sparkConf={
            "spark.hadoop.fs.ftspark.local-recovery.dir": "/mnt/state",
            "spark.hadoop.fs.ftspark.local-recovery.key.file": "/tmp/my-key",
            "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.sql.shuffle.partitions": "7",
        },
    )
    conf = spark_conf(attempt)
    assert conf["spark.hadoop.fs.ftspark.local-recovery.dir"] == "/mnt/state/jobs/ns/0123456789ab/state"
    assert conf["spark.hadoop.fs.ftspark.local-recovery.key.file"] == "/etc/ftspark/local-recovery/key"
    assert conf["spark.hadoop.fs.s3a.impl"] == "io.ftspark.localrecovery.LocalRecoveryFileSystem"
    assert conf["spark.sql.shuffle.partitions"] == "7", "other settings stay the user's"


def test_local_recovery_key_is_a_per_job_secret_mounted_as_a_file_in_executors_only() -> None:
    attempt = plan(localRecovery={"enabled": True})
    secret = local_recovery_secret(attempt, bytes(range(32)))
    assert secret["metadata"]["name"] == "job-local-recovery-01234567"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0123456789ab"
    assert base64.b64decode(secret["data"]["key"]) == bytes(range(32))

    template = executor_pod_template(attempt)
    [key_volume] = [v for v in template["spec"]["volumes"] if "secret" in v]
    assert key_volume["secret"] == {"secretName": "job-local-recovery-01234567"}
    container = template["spec"]["containers"][0]
    [key_mount] = [m for m in container["volumeMounts"] if m["name"] == key_volume["name"]]
    assert key_mount["readOnly"] is True
    key_file = spark_conf(attempt)["spark.hadoop.fs.ftspark.local-recovery.key.file"]
    assert posixpath.dirname(key_file) == key_mount["mountPath"]
    assert "env" not in container
    # The driver keeps no copies (it has no node directory): it gets neither the key nor the claim.
    driver = driver_pod(attempt)
    key_secret = {"secretName": "job-local-recovery-01234567"}
    assert not any(
        v.get("secret") == key_secret or "persistentVolumeClaim" in v for v in driver["spec"]["volumes"]
    )
    # A job without localRecovery mounts nothing of it.
    assert not [
        v
        for v in executor_pod_template(plan())["spec"]["volumes"]
        if "secret" in v or "persistentVolumeClaim" in v
    ]


def test_executor_admission_probe_is_a_complete_executor_pod() -> None:
    attempt = plan(localRecovery={"enabled": True, "hostPath": "/mnt/state"})
    probe = executor_admission_probe(attempt)
    assert probe["kind"] == "Pod" and probe["metadata"]["name"] == "job-3-driver-executor-probe"
    assert [c["image"] for c in probe["spec"]["containers"]] == ["img:1"]
    assert probe["spec"]["volumes"] == executor_pod_template(attempt)["spec"]["volumes"]


@pytest.mark.parametrize(
    ("driver", "conf", "memory"),
    [
        ({}, {}, "1408Mi"),  # 1g + the 384 MiB minimum overhead
        ({"memory": "4g"}, {}, "4505Mi"),  # 4096 + 10 % (409)
        ({"memory": "4g"}, {"spark.driver.memoryOverheadFactor": "0.2"}, "4915Mi"),
        ({"memory": "512m"}, {"spark.driver.memoryOverhead": "1g"}, "1536Mi"),
        ({"memory": "2048"}, {"spark.driver.minMemoryOverhead": "1g"}, "3072Mi"),
        ({}, {"spark.driver.memory": "3gb"}, "3456Mi"),  # sparkConf wins, as Spark reads it
    ],
)
def test_driver_memory_request_and_limit_include_sparks_overhead(
    driver: dict[str, str], conf: dict[str, str], memory: str
) -> None:
    resources = driver_pod(plan(driver=driver, sparkConf=conf))["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "1", "memory": memory}, "limits": {"memory": memory}}


def test_the_drivers_cpu_request_is_sparks_request_cores_when_set() -> None:
    """As spark-submit sizes a driver pod: fewer CPUs asked of the scheduler than the driver's cores."""
    conf = {"spark.kubernetes.driver.request.cores": "500m"}
    resources = driver_pod(plan(driver={"cores": 2}, sparkConf=conf))["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "500m"
    assert spark_conf(plan(driver={"cores": 2}, sparkConf=conf))["spark.driver.cores"] == "2"


def test_rpc_is_authenticated_with_the_attempts_secret_which_no_pod_spec_holds() -> None:
    attempt = plan()
    conf = spark_conf(attempt)
    assert conf["spark.authenticate"] == "true"
    secret = attempt_secret(attempt, b"\x00key", b"checkpoint-key")
    assert secret["metadata"]["name"] == "job-3-driver-rpc"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0123456789ab"
    assert secret["immutable"] is True
    # The driver's file holds the bytes; Spark's key is their base64 (AGtleQ==), which executors get.
    assert base64.b64decode(secret["data"]["secret"]) == b"\x00key"
    assert base64.b64decode(secret["data"]["key"]) == b"AGtleQ=="
    driver = driver_pod(attempt)
    path = conf["spark.authenticate.secret.file"]  # Spark's fallback for the driver's and executors' files
    volumes = {v["name"]: v for v in driver["spec"]["volumes"]}
    container = driver["spec"]["containers"][0]
    (mount,) = (m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"] == {
        "secretName": "job-3-driver-rpc",
        "items": [{"key": "secret", "path": "secret"}],
    }
    assert path == f"{mount['mountPath']}/secret"
    # Executors: the env var Spark reads first, by reference (Spark's own secretKeyRef setting).
    assert conf["spark.kubernetes.executor.secretKeyRef._SPARK_AUTH_SECRET"] == "job-3-driver-rpc:key"
    executor = executor_pod_template(attempt)
    assert not [v for v in executor["spec"]["volumes"] if "secret" in v]
    assert "AGtleQ==" not in json.dumps([driver, executor, conf])
    encrypted = spark_conf(plan(sparkConf={"spark.network.crypto.enabled": "true"}))
    assert encrypted["spark.network.crypto.enabled"] == "true"
    assert spark_conf(plan(sparkConf={"spark.authenticate": "false"}))["spark.authenticate"] == "false"


def test_the_ui_is_off_unless_the_job_turns_it_on() -> None:
    assert spark_conf(plan())["spark.ui.enabled"] == "false"
    assert spark_conf(plan(sparkConf={"spark.ui.enabled": "true"}))["spark.ui.enabled"] == "true"


def test_deps_reach_spark_as_spark_submit_would_pass_them() -> None:
    conf = spark_conf(
        plan(
            pyFiles=["s3://bkt/old.zip"],
            deps={
                "pyFiles": ["s3://bkt/lib.zip", "local:///opt/app/util.py"],
                "files": ["s3://bkt/lookup.csv"],
                "jars": ["s3a://bkt/udf.jar", "/opt/jars/x.jar"],
                "archives": ["s3://bkt/env.tar.gz#environment"],
            },
        )
    )
    assert conf["spark.submit.pyFiles"] == "s3://bkt/old.zip,s3://bkt/lib.zip,local:///opt/app/util.py"
    assert conf["spark.files"] == "s3://bkt/lookup.csv"
    assert conf["spark.jars"] == "s3a://bkt/udf.jar,/opt/jars/x.jar"
    assert conf["spark.archives"] == "s3://bkt/env.tar.gz#environment"
    assert not {"spark.files", "spark.jars", "spark.archives"} & spark_conf(plan()).keys()
    env = {
        e["name"]: e.get("value")
        for e in driver_pod(plan(deps={"maxFileMiB": 64}))["spec"]["containers"][0]["env"]
    }
    assert env[DriverEnv.DEPS_MAX_FILE_MIB] == "64"


@pytest.mark.parametrize(
    ("deps", "named"),
    [
        ({"jars": ["s3://bkt/udf.zip"]}, "spec.deps.jars[0]: 's3://bkt/udf.zip': a jar must be a .jar file"),
        ({"files": ["http://host/a.csv"]}, "spec.deps.files[0]: 'http://host/a.csv': neither an S3 object"),
        ({"files": ["relative/a.csv"]}, "spec.deps.files[0]: 'relative/a.csv': neither"),
        ({"files": ["/opt/../etc/passwd"]}, "spec.deps.files[0]: '/opt/../etc/passwd': neither"),
        ({"pyFiles": ["s3://bkt/lib.zip#x"]}, "spec.deps.pyFiles[0]: 's3://bkt/lib.zip#x': only archives"),
        (
            {"archives": ["s3://bkt/e.zip#.."]},
            "spec.deps.archives[0]: 's3://bkt/e.zip#..': #.. is not a directory",
        ),
        ({"archives": ["s3://bkt/envs/"]}, "spec.deps.archives[0]: 's3://bkt/envs/': not an S3 object URI"),
        ({"maxFileMiB": 0}, "maxFileMiB"),
    ],
)
def test_a_dependency_spark_cannot_take_is_refused_naming_its_field(deps: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(named)):
        plan(deps=deps)


def test_a_dependency_kind_is_shipped_in_one_place() -> None:
    with pytest.raises(ValidationError, match=r"spec.sparkConf\[spark.jars\] and spec.deps both ship"):
        plan(deps={"jars": ["s3://bkt/a.jar"]}, sparkConf={"spark.jars": "s3://bkt/b.jar"})
    assert spark_conf(plan(sparkConf={"spark.jars": "s3://bkt/b.jar"}))["spark.jars"] == "s3://bkt/b.jar"


def test_the_state_store_is_sparks_default_unless_the_job_chooses_one() -> None:
    provider, changelog = STATE_STORE_PROVIDER_KEY, CHANGELOG_CHECKPOINTING_KEY
    assert provider not in spark_conf(plan()), "Spark's own default: no setting"
    rocksdb = spark_conf(plan(stateStore={"provider": "rocksdb"}))
    assert rocksdb[provider].endswith(".RocksDBStateStoreProvider") and rocksdb[changelog] == "true"
    plain = spark_conf(plan(stateStore={"provider": "rocksdb", "changelogCheckpointing": False}))
    assert plain[changelog] == "false"
    hdfs = spark_conf(plan(stateStore={"provider": "hdfs"}))
    assert hdfs[provider].endswith(".HDFSBackedStateStoreProvider") and changelog not in hdfs
    # Set in sparkConf alone, as before the field: the user's.
    own = spark_conf(plan(sparkConf={provider: "com.example.Store"}))
    assert own[provider] == "com.example.Store"
    with pytest.raises(
        ValidationError, match=r"sparkConf\[spark.sql.streaming.stateStore.providerClass\] and "
    ):
        plan(stateStore={"provider": "rocksdb"}, sparkConf={provider: "com.example.Store"})
    with pytest.raises(ValidationError, match="provider"):
        plan(stateStore={"provider": "memory"})


def test_only_the_attempts_executors_and_driver_reach_the_driver() -> None:
    policy = driver_network_policy(plan())
    assert policy["metadata"]["name"] == "job-3-driver"
    assert policy["metadata"]["ownerReferences"][0]["kind"] == "FaultTolerantSparkJob"
    spec = policy["spec"]
    driver = {"ftspark.io/job": "job", "ftspark.io/attempt": "3", "ftspark.io/role": "driver"}
    assert spec["podSelector"] == {"matchLabels": driver}
    assert driver_pod(plan())["metadata"]["labels"].items() >= driver.items()
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {"spark-app-selector": "ftspark-01234567-3", "spark-role": "executor"}
            }
        },
        {"podSelector": {"matchLabels": driver}},
    ]
    assert [p["port"] for p in rule["ports"]] == [7078, 7079]


def test_a_spark_conf_too_big_for_the_drivers_environment_is_refused_by_validation() -> None:
    with pytest.raises(ValidationError, match="at most 65536 fit the driver's environment"):
        plan(sparkConf={"spark.app.blob": "x" * 70_000})
    largest = plan(sparkConf={"spark.app.blob": "x" * 64_000})
    env = {e["name"]: e.get("value", "") for e in driver_pod(largest)["spec"]["containers"][0]["env"]}
    assert len(f"FTSPARK_SPARK_CONF={env['FTSPARK_SPARK_CONF']}".encode()) < 128 * 1024


def test_a_standby_is_the_attempts_driver_pod_kept_off_the_drivers_node_and_probed_for_its_session() -> None:
    liveness_off = {"liveness": {"progressTimeoutSeconds": 0}}
    active, standby = (
        driver_pod(plan(**liveness_off)),
        driver_pod(replace(plan(**liveness_off), standby=True, spec_hash="abc123")),
    )
    labels = standby["metadata"]["labels"]
    assert {**labels, SERVING_LABEL: "true"} == {
        **active["metadata"]["labels"],
        STANDBY_LABEL: "true",
        SPEC_HASH_LABEL: "abc123",
    }, "a standby's labels: the driver's but the one the UI Service selects, and its own two"
    # Covered by the attempt's NetworkPolicy from the start, as the active driver is.
    selector = driver_network_policy(plan())["spec"]["podSelector"]["matchLabels"]
    assert labels.items() >= selector.items()
    (container,) = standby["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[DriverEnv.STANDBY] == "1" and env[DriverEnv.HEALTH_PORT] == str(HEALTH_PORT)
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": HEALTH_PORT}
    assert "livenessProbe" not in container, "liveness stays the job's choice"
    (active_container,) = active["spec"]["containers"]
    assert DriverEnv.STANDBY not in {e["name"] for e in active_container["env"]}
    assert "readinessProbe" not in active_container and "affinity" not in active["spec"]
    (term,) = standby["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"] == {
        "matchLabels": {"ftspark.io/job": "job", "ftspark.io/role": "driver"},
        "matchExpressions": [{"key": STANDBY_LABEL, "operator": "DoesNotExist"}],
    }
    # The executors it keeps warm: preferably off that node too, and with localRecovery's affinity kept.
    warm = replace(plan(localRecovery={"enabled": True}), standby=True, local_state_nodes=("n1",))
    affinity = executor_pod_template(warm)["spec"]["affinity"]
    (away,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert away["podAffinityTerm"] == term and away["weight"] == 100
    assert "nodeAffinity" in affinity
    assert "affinity" not in executor_pod_template(plan())["spec"], "the job's own executors: anywhere"


def test_image_pull_secrets_reach_the_driver_its_standby_and_the_executors() -> None:
    attempt = plan(imagePullSecrets=["registry-a", "registry-b"])
    wanted = [{"name": "registry-a"}, {"name": "registry-b"}]
    assert driver_pod(attempt)["spec"]["imagePullSecrets"] == wanted
    assert driver_pod(replace(attempt, standby=True))["spec"]["imagePullSecrets"] == wanted
    assert executor_pod_template(attempt)["spec"]["imagePullSecrets"] == wanted
    assert "imagePullSecrets" not in driver_pod(plan())["spec"], "none asked, none set"
    with pytest.raises(ValidationError, match="imagePullSecrets"):
        plan(imagePullSecrets=["Not_A_Name"])


def test_the_ui_service_follows_the_serving_driver_and_its_ingress_takes_the_installations_defaults() -> None:
    keys = AttemptKeys(rpc=b"rpc", checkpoint=b"checkpoint", local_recovery=b"mac")
    assert ui_objects(plan()) == () and spark_conf(plan())["spark.ui.enabled"] == "false", "off by default"
    with_ui = plan(ui={"enabled": True})
    (service,) = attempt_objects(with_ui, keys).job_objects
    assert service["kind"] == "Service" and service["metadata"]["name"] == "job-ui"
    selector = service["spec"]["selector"]
    driver, standby = driver_pod(with_ui), driver_pod(replace(with_ui, standby=True, spec_hash="h"))
    assert selector.items() <= driver["metadata"]["labels"].items(), "the job's driver serves the UI"
    assert not selector.items() <= standby["metadata"]["labels"].items(), "a standby does not, until promoted"
    conf = spark_conf(with_ui)
    assert (conf["spark.ui.enabled"], conf["spark.ui.killEnabled"]) == ("true", "false")
    assert "spark.ui.proxyBase" not in conf
    (_, ui_rule) = driver_network_policy(with_ui)["spec"]["ingress"]
    assert ui_rule["ports"] == [{"protocol": "TCP", "port": 4040}]
    assert ui_url("ns", "job", with_ui.spec) == "http://job-ui.ns.svc:4040"

    installation = UiIngressSpec(enabled=True, class_name="nginx", host="spark.example.com")
    behind = replace(with_ui, spec=JobDefaults(ui_ingress=installation).applied_to(with_ui.spec))
    service, ingress = ui_objects(behind)
    (rule,) = ingress["spec"]["rules"]
    assert (ingress["spec"]["ingressClassName"], rule["host"]) == ("nginx", "spark.example.com")
    assert rule["http"]["paths"][0]["path"] == "/spark/ns/job" == spark_conf(behind)["spark.ui.proxyBase"]
    assert ui_url("ns", "job", behind.spec) == "http://spark.example.com/spark/ns/job/"
    own = plan(ui={"enabled": True, "ingress": {"enabled": False}})
    own = replace(own, spec=JobDefaults(ui_ingress=installation).applied_to(own.spec))
    assert len(ui_objects(own)) == 1, "the job's own word wins"
    with pytest.raises(ValidationError, match=r"spec\.ui both set the UI"):
        plan(ui={"enabled": True}, sparkConf={"spark.ui.enabled": "true"})


def test_dynamic_allocation_replaces_the_fixed_executor_count() -> None:
    fixed = spark_conf(plan(executor={"instances": 4}))
    assert fixed["spark.executor.instances"] == "4" and "spark.dynamicAllocation.enabled" not in fixed
    scaling = {"enabled": True, "minExecutors": 1, "maxExecutors": 3, "shuffleTrackingTimeoutSeconds": 30}
    conf = spark_conf(plan(executor={"instances": 4}, dynamicAllocation=scaling))
    assert "spark.executor.instances" not in conf, "else Spark would start max(4, min, initial)"
    assert {k: v for k, v in conf.items() if k.startswith("spark.dynamicAllocation.")} == {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": "3",
        "spark.dynamicAllocation.initialExecutors": "1",
        "spark.dynamicAllocation.executorIdleTimeout": "60s",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.timeout": "30s",
    }
    for wrong, says in (
        ({"minExecutors": 4, "maxExecutors": 2}, "minExecutors must be <= maxExecutors"),
        ({"maxExecutors": 3, "initialExecutors": 9}, "initialExecutors must lie within"),
    ):
        with pytest.raises(ValidationError, match=says):
            plan(dynamicAllocation={"enabled": True, **wrong})
    with pytest.raises(ValidationError, match="leave standbyExecutors 0"):
        plan(dynamicAllocation={"enabled": True}, driver={"standby": 1, "standbyExecutors": 1})
    with pytest.raises(ValidationError, match="keep one"):
        plan(dynamicAllocation={"enabled": True}, sparkConf={"spark.dynamicAllocation.maxExecutors": "5"})
