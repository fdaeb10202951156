"""The Helm chart: lint, what it renders, and its plain-manifest twin in deploy/."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ftspark.app.config import OperatorConfig, parse
from ftspark.manifests import DRIVER_RULES, LOCAL_STATE_VOLUME_PREFIX, local_state_volume_name
from ftspark.protocol import DRIVER_SERVICE_ACCOUNT, driver_lease_name, driver_pod_name
from ftspark_dev.cluster.processes import REPO_ROOT, built_by
from ftspark_dev.generate.bundle import render_bundle
from tests.helm.conftest import CHART, KUBE_VERSION, Render, run_helm

BUNDLE = REPO_ROOT / "deploy" / "ftspark-operator.yaml"
ALERT_TESTS = Path(__file__).with_name("alert_rules.test.yaml")


def _kinds(documents: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        found.setdefault(document["kind"], []).append(document)
    return found


def test_chart_lints_in_both_rbac_modes(helm: Path) -> None:
    for extra in (["--set=watchNamespaces={jobs}"], ["--set=rbac.clusterWide=true"]):
        result = run_helm(helm, "lint", "--strict", str(CHART), f"--kube-version={KUBE_VERSION}", *extra)
        assert result.returncode == 0, result.stdout + result.stderr


def test_default_install_is_two_hardened_replicas_with_lease_liveness(render: Render) -> None:
    kinds = _kinds(render())
    deployment = kinds["Deployment"][0]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "300Mi"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["FTSPARK_LEASE_DURATION"], env["FTSPARK_RENEW_DEADLINE"], env["FTSPARK_RETRY_PERIOD"]) == (
        "15",
        "10",
        "2",
    )
    assert kinds["PodDisruptionBudget"][0]["spec"]["minAvailable"] == 1
    assert "ServiceMonitor" not in kinds
    assert {"Role", "RoleBinding", "ServiceAccount", "Service", "ValidatingAdmissionPolicy"} <= kinds.keys()
    assert [r["metadata"]["name"] for r in kinds["ClusterRole"]] == ["ftspark-operator-node-drains"], (
        "least privilege by default: the namespaces of jobs, listed; of the cluster only the nodes, read"
    )
    assert {r["metadata"]["namespace"] for r in kinds["Role"]} == {
        "ftspark-system",
        "jobs",
        "kube-node-lease",
    }
    assert env["FTSPARK_WATCH_NAMESPACES"] == "jobs"


def test_operator_rights_are_the_least_it_needs(render: Render) -> None:
    rules = _named(_kinds(render("rbac.clusterWide=true"))["ClusterRole"], "ftspark-operator")[0]["rules"]
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted[("ftspark.io", "faulttolerantsparkjobs")] == {
        "get",
        "list",
        "watch",
        "create",
        "delete",
    }, "the operator never writes a job's spec; it creates a schedule's runs and deletes finished jobs"
    assert granted[("ftspark.io", "scheduledsparkjobs")] == {"get", "list", "watch"}
    # What its watches need: jobs, driver pods and (checkpoint records) ConfigMaps, listed and watched.
    for watched in [("ftspark.io", "faulttolerantsparkjobs"), ("", "pods"), ("", "configmaps")]:
        assert {"list", "watch"} <= granted[watched], watched
    # Secrets it creates and deletes, never reads: localRecovery's per-job keys, the attempts' RPC Secrets.
    assert granted[("", "secrets")] == {"create", "delete"}
    # Services only for spec.ui (executors reach their driver at its pod IP), made, never read. Claims it
    # makes (localRecovery's), never reads.
    assert granted[("", "services")] == granted[("networking.k8s.io", "ingresses")] == {"create"}
    assert not {"nodes", "persistentvolumes"} & {resource for _, resource in granted}
    assert granted[("", "persistentvolumeclaims")] == {"create"}
    assert all("deletecollection" not in verbs for verbs in granted.values())
    assert all("*" not in verbs for verbs in granted.values())
    # It grants the drivers their Role, so it holds every right of it (Kubernetes forbids granting more).
    for rule in DRIVER_RULES:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert set(rule["verbs"]) <= granted[(group, resource)], (group, resource)


def test_cluster_scoped_rights_are_node_reads_for_drains_and_local_recoverys_volumes_when_asked_for(
    render: Render,
) -> None:
    """Nodes and PersistentVolumes are cluster-scoped: the namespaced mode's only ClusterRoles, each there
    only with the feature that needs it."""
    [nodes] = _kinds(render())["ClusterRole"]
    assert nodes["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    without = _kinds(render("jobDefaults.driverDisruptionBudget=false", "localRecovery.enabled=true"))
    env = {
        e["name"]: e.get("value")
        for e in without["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["FTSPARK_DRIVER_DISRUPTION_BUDGET"] == "false", "no node watch, and so no budgets"
    [role] = without["ClusterRole"]
    assert role["metadata"]["name"] == "ftspark-operator-local-state-volumes"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["persistentvolumes"],
            "verbs": ["get", "list", "create", "patch", "delete"],
        }
    ]
    [binding] = without["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_namespaced_mode_grants_roles_only_where_jobs_live(render: Render) -> None:
    kinds = _kinds(render("watchNamespaces={team-a,team-b}", "jobDefaults.driverDisruptionBudget=false"))
    assert "ClusterRole" not in kinds
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in kinds["Role"]}
    assert roles == {
        ("team-a", "ftspark-operator"),
        ("team-b", "ftspark-operator"),
        ("ftspark-system", "ftspark-operator-self"),
        ("ftspark-system", "ftspark-operator-record-key"),
        ("kube-node-lease", "ftspark-operator-node-leases"),  # the kubelets' heartbeats, read
    }
    env = {
        e["name"]: e.get("value")
        for e in kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["FTSPARK_WATCH_NAMESPACES"] == "team-a,team-b"


def test_bad_values_are_refused_with_the_reason(helm: Path) -> None:
    for namespaces in ("{kube-system}", "{jobs,kube-system}"):
        system = run_helm(
            helm,
            "template",
            "x",
            str(CHART),
            f"--kube-version={KUBE_VERSION}",
            f"--set=watchNamespaces={namespaces}",
        )
        assert system.returncode != 0
        assert "never manages kube-system" in system.stderr
    # Its own namespace: a driver's Role there would reach its Lease, results and record key.
    refusals = {
        "watchNamespaces={jobs,x}": "never manages its own namespace x",
        "rbac.clusterWide=true,watchNamespaces={x}": "never manages its own namespace x",
        "": "list the namespaces whose",
    }
    for values, reason in refusals.items():
        flags = [f"--set={values}"] if values else []
        own = run_helm(
            helm, "template", "x", str(CHART), "--namespace=x", f"--kube-version={KUBE_VERSION}", *flags
        )
        assert own.returncode != 0 and reason in own.stderr
    zero = run_helm(
        helm, "template", "x", str(CHART), f"--kube-version={KUBE_VERSION}", "--set=replicaCount=0"
    )
    assert zero.returncode != 0
    assert "replicaCount" in zero.stderr


def test_the_operator_may_write_only_its_own_labelled_objects(render: Render) -> None:
    def named(kind: str, values: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        documents = _kinds(render(*values)).get(kind, [])
        return [d for d in documents if d["metadata"]["name"].startswith("ftspark-operator-operator-writes")]

    (policy,) = named("ValidatingAdmissionPolicy")
    unlabelled, kube_system = named("ValidatingAdmissionPolicyBinding")
    for binding in (unlabelled, kube_system):
        assert binding["spec"]["policyName"] == policy["metadata"]["name"]
        assert binding["spec"]["validationActions"] == ["Deny"]
    # What the policy's CEL refuses, selected without CEL: the operator's own writes pay for none.
    selected = unlabelled["spec"]["matchResources"]["objectSelector"]["matchExpressions"]
    assert {(e["key"], e["operator"]) for e in selected} == {
        ("ftspark.io/job", "DoesNotExist"),
        ("ftspark.io/result", "DoesNotExist"),
        ("app.kubernetes.io/managed-by", "NotIn"),
    }
    assert kube_system["spec"]["matchResources"] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    }
    (condition,) = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:ftspark-system:ftspark-operator" in condition["expression"]
    assert named("ValidatingAdmissionPolicy", ("admission.operatorWrites=false",)) == []
    assert named("ValidatingAdmissionPolicyBinding", ("admission.operatorWrites=false",)) == []


def test_the_operators_pods_are_checked_as_the_drivers_executors_are(render: Render) -> None:
    """The operator's pod creates pass the same content checks as a driver's executors (one shared template),
    in every namespace, and nothing else of the operator's pays for them."""
    kinds = _kinds(render("jobPolicy.allow={hostPath}"))
    (pods,) = _named(kinds["ValidatingAdmissionPolicy"], "ftspark-operator-operator-pods")
    (driver,) = _named(kinds["ValidatingAdmissionPolicy"], "ftspark-operator-driver-requests")
    (binding,) = _named(kinds["ValidatingAdmissionPolicyBinding"], "ftspark-operator-operator-pods")
    assert binding["spec"] == {"policyName": "ftspark-operator-operator-pods", "validationActions": ["Deny"]}
    (rule,) = pods["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["operations"], rule["resources"]) == (["CREATE"], ["pods"])
    (condition,) = pods["spec"]["matchConditions"]
    assert condition["expression"].endswith('== "system:serviceaccount:ftspark-system:ftspark-operator"')
    assert pods["spec"]["variables"] == driver["spec"]["variables"][-3:]
    assert pods["spec"]["variables"][0]["expression"].startswith('["hostPath"] + ')

    def subject(text: str) -> str:
        return text.replace("a pod the ftspark operator creates", "an executor")

    executors = [v for v in driver["spec"]["validations"] if "an executor" in str(v)]
    assert [{k: subject(v) for k, v in check.items()} for check in pods["spec"]["validations"]] == executors
    assert len(executors) == 5


def test_ha_store_on_s3_needs_a_root(helm: Path, render: Render) -> None:
    def env(*values: str) -> dict[str, str]:
        container = _kinds(render(*values))["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value") for e in container["env"]}

    assert env()["FTSPARK_HA_STORE"] == "configmaps"
    on_s3 = env("haStore.type=s3", "haStore.s3Root=s3://ha/ftspark")
    assert (on_s3["FTSPARK_HA_STORE"], on_s3["FTSPARK_HA_S3_ROOT"]) == ("s3", "s3://ha/ftspark")
    for refused in (["haStore.type=s3"], ["haStore.s3Root=s3://ha/ftspark"], ["haStore.type=etcd"]):
        sets = [f"--set={value}" for value in refused]
        result = run_helm(helm, "template", "x", str(CHART), f"--kube-version={KUBE_VERSION}", *sets)
        assert result.returncode != 0, refused
        assert "haStore" in result.stderr, result.stderr


def test_service_monitor_when_asked(render: Render) -> None:
    monitor = _kinds(render("serviceMonitor.enabled=true"))["ServiceMonitor"][0]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True, "a job's series keep their namespace and job labels"


def test_the_alert_rules_fire_when_and_only_when_they_say(render: Render, tmp_path: Path) -> None:
    """Each rule of the chart's PrometheusRule, as rendered, through Prometheus's own rule evaluation
    (tools/alertrules) on the cases of tests/helm/alert_rules.test.yaml."""
    assert "PrometheusRule" not in _kinds(render()), "off by default: it needs the Prometheus Operator"
    (rule,) = _kinds(render("prometheusRule.enabled=true", "prometheusRule.labels.release=prom"))[
        "PrometheusRule"
    ]
    assert rule["metadata"]["labels"]["release"] == "prom"
    groups = tmp_path / "rules.yaml"
    groups.write_text(yaml.safe_dump(rule["spec"]))
    runner = built_by(REPO_ROOT / "tools" / "alertrules" / "build.sh")
    result = subprocess.run(
        [str(runner), str(groups), str(ALERT_TESTS)], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tested = {
        case["alertname"]
        for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    }
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert tested == alerts, f"untested: {sorted(alerts - tested)}"


def test_plain_manifest_bundle_is_the_rendered_chart(helm: Path) -> None:
    assert BUNDLE.read_text() == render_bundle(helm), "deploy/ drifted from the chart: run `make deploy`"


def test_job_policy_is_enforced_at_apply_time_by_default_and_can_be_turned_off(render: Render) -> None:
    kinds = _kinds(
        render("jobPolicy.allow={hostPath,nodeName}", "admission.operatorWrites=false", "watchNamespaces={a}")
    )
    (policy,) = _named(kinds["ValidatingAdmissionPolicy"], "ftspark-operator-ftspark-system")
    (binding,) = _named(kinds["ValidatingAdmissionPolicyBinding"], "ftspark-operator-ftspark-system")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert policy["spec"]["variables"][0] == {
        "name": "allowedEverywhere",
        "expression": '["hostPath","nodeName"]',
    }
    selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert selector["values"] == ["a"]
    env = {
        e["name"]: e.get("value")
        for e in kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["FTSPARK_ALLOW"] == "hostPath,nodeName", "the operator grants the same"
    # Reading a namespace's allow.ftspark.io/* labels: a Role grants it for its own namespace.
    assert any("namespaces" in rule["resources"] for rule in kinds["Role"][0]["rules"])
    (driver_binding,) = _named(kinds["ValidatingAdmissionPolicyBinding"], "ftspark-operator-driver-requests")
    (watched,) = driver_binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert watched["values"] == ["a"]
    off = ("jobPolicy.admission=false", "admission.operatorWrites=false", "admission.driverRequests=false")
    assert "ValidatingAdmissionPolicy" not in _kinds(render(*off))


def test_cluster_wide_the_job_policy_refuses_jobs_in_the_operators_own_namespace(render: Render) -> None:
    """Cluster-wide, every namespace is watched, the operator's own too: a job there is refused at apply time
    (and by the operator, tests/unit/test_reconciler.py), as its drivers' Role would reach the Lease."""
    kinds = _kinds(render("rbac.clusterWide=true", namespace="ops"))
    (policy,) = _named(kinds["ValidatingAdmissionPolicy"], "ftspark-operator-ops")
    (binding,) = _named(kinds["ValidatingAdmissionPolicyBinding"], "ftspark-operator-ops")
    assert "matchResources" not in binding["spec"], "every namespace"
    assert policy["spec"]["validations"][0]["expression"] == "request.namespace != 'ops'"
    assert "the operator's own namespace ops runs no jobs" in policy["spec"]["validations"][0]["message"]


def _named(documents: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [d for d in documents if d["metadata"]["name"] == name]


def _operator_config(render: Render, monkeypatch: pytest.MonkeyPatch, *values: str) -> OperatorConfig:
    """What the operator makes of the chart's environment for its container."""
    container = _kinds(render(*values))["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    for variable in container["env"]:
        if variable["name"].startswith("FTSPARK_") and variable.get("value"):
            monkeypatch.setenv(variable["name"], variable["value"])
    return parse([])


def test_node_leases_are_read_only_and_only_while_node_silence_is_watched(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    roles = _named(_kinds(render())["Role"], "ftspark-operator-node-leases")
    assert [(r["metadata"]["namespace"], r["rules"]) for r in roles] == [
        (
            "kube-node-lease",
            [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]}],
        )
    ]
    assert _operator_config(render, monkeypatch).node_silence_seconds == 20
    off = render("nodeSilenceSeconds=0")
    assert not _named(_kinds(off)["Role"], "ftspark-operator-node-leases")
    assert _operator_config(render, monkeypatch, "nodeSilenceSeconds=0").node_silence_seconds == 0


def test_result_caps_reach_the_operator_as_whole_numbers(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    for values, expected in (([], (2592000, 1000)), (["maxResultRetentionSeconds=864000"], (864000, 1000))):
        config = _operator_config(render, monkeypatch, *values)
        assert (config.max_result_retention_seconds, config.max_results_per_namespace) == expected


def test_the_finished_jobs_default_ttl_reaches_the_operator(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _operator_config(render, monkeypatch).default_ttl_seconds_after_finished is None
    for ttl in (0, 3600):
        config = _operator_config(render, monkeypatch, f"jobDefaults.ttlSecondsAfterFinished={ttl}")
        assert config.default_ttl_seconds_after_finished == ttl


def test_the_ui_ingress_defaults_reach_the_operator(render: Render, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _operator_config(render, monkeypatch).ui_ingress.enabled
    values = ("ui.ingress.enabled=true", "ui.ingress.className=nginx", "ui.ingress.host=spark.example.com")
    ingress = _operator_config(render, monkeypatch, *values).ui_ingress
    assert (ingress.enabled, ingress.class_name, ingress.host, ingress.tls_secret_name) == (
        True,
        "nginx",
        "spark.example.com",
        None,
    )


def test_the_checkpoint_refresh_budget_reaches_the_operator(
    helm: Path, render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _operator_config(render, monkeypatch).checkpoint_refreshes_per_second == 20.0
    paced = _operator_config(render, monkeypatch, "checkpointRefreshesPerSecond=5")
    assert paced.checkpoint_refreshes_per_second == 5.0
    zero = run_helm(
        helm,
        "template",
        "x",
        str(CHART),
        f"--kube-version={KUBE_VERSION}",
        "--set=checkpointRefreshesPerSecond=0",
    )
    assert zero.returncode != 0
    assert "checkpointRefreshesPerSecond" in zero.stderr


@pytest.mark.parametrize("mode", ["rbac.clusterWide=true", "watchNamespaces={team-a}"])
def test_the_only_secret_the_operator_reads_is_its_record_key_in_its_own_namespace(
    render: Render, mode: str
) -> None:
    kinds = _kinds(render(mode))
    (role,) = (r for r in kinds["Role"] if r["metadata"]["name"] == "ftspark-operator-record-key")
    assert role["metadata"]["namespace"] == "ftspark-system"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["ftspark-operator-record-key"],
            "verbs": ["get"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    reads = [
        rule
        for r in kinds["Role"] + kinds.get("ClusterRole", [])
        for rule in r["rules"]
        if "secrets" in rule["resources"] and {"get", "list", "watch"} & set(rule["verbs"])
    ]
    assert reads == [role["rules"][0]]


def test_the_driver_policy_names_what_the_operator_names() -> None:
    """The policies on the drivers' requests and the operator's volumes are written by hand: the
    ServiceAccount, the names of a driver's pod, records and Lease, and localRecovery's volume name and
    directory layout they check are the operator's own."""
    policy = (CHART / "templates" / "admission-driver.yaml").read_text()
    shared = (CHART / "templates" / "_helpers.tpl").read_text()  # its pod checks, the operator's pods' too
    assert f"':{DRIVER_SERVICE_ACCOUNT}'" in policy
    assert f"object.spec.serviceAccountName == '{DRIVER_SERVICE_ACCOUNT}'" in shared
    volumes = (CHART / "templates" / "admission-operator.yaml").read_text()
    uid = str(uuid.uuid4())
    name = local_state_volume_name(uid)
    assert f"'^{LOCAL_STATE_VOLUME_PREFIX}[0-9a-f-]{{36}}$'" in volumes and re.fullmatch(
        f"{LOCAL_STATE_VOLUME_PREFIX}[0-9a-f-]{{36}}", name
    )
    assert f"object.metadata.name.substring({len(LOCAL_STATE_VOLUME_PREFIX)})" in volumes
    assert name[len(LOCAL_STATE_VOLUME_PREFIX) :] == uid
    assert "'/jobs/' + object.spec.claimRef.namespace + '/'" in volumes  # local_recovery_node_dir's layout
    job = "counts"
    assert driver_pod_name(job, 7).removeprefix(job) == "-7-driver"  # what '-[0-9]+-driver$' finds
    assert driver_lease_name(job) == f"{job}-driver" and "variables.job + '-driver'" in policy
    assert "variables.job + '-checkpoints'" in policy  # the ConfigMap store's record (e2e: real drivers)


def test_the_storage_prefixes_reach_the_operator(render: Render, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _operator_config(render, monkeypatch).storage_prefixes == ()
    limited = _operator_config(render, monkeypatch, "jobPolicy.storagePrefixes={s3://team-a/x,s3://shared}")
    assert limited.storage_prefixes == ("s3://team-a/x", "s3://shared")
    # The job policy refuses the same at apply time (tests/integration/test_policy.py runs it).
    kinds = _kinds(render("jobPolicy.storagePrefixes={s3://team-a/x,s3://shared}"))
    (policy,) = _named(kinds["ValidatingAdmissionPolicy"], "ftspark-operator-ftspark-system")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["storageEverywhere"] == '["s3://team-a/x","s3://shared"]'


def test_it_renders_offline_without_a_kube_version(helm: Path) -> None:
    """`helm template` as GitOps tools other than Argo CD run it: helm's offline default is Kubernetes 1.20,
    so the chart names no kubeVersion; on a cluster older than 1.30 the API server refuses its
    admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy by name instead (docs/quickstart.md)."""
    offline = run_helm(
        helm, "template", "x", str(CHART), "--namespace=ftspark-system", "--set=watchNamespaces={jobs}"
    )
    assert offline.returncode == 0, offline.stderr
    assert "kind: ValidatingAdmissionPolicy" in offline.stdout
