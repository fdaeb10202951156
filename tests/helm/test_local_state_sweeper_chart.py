"""The chart's local-state sweeper (localRecovery.sweeper): off by default; on, a DaemonSet whose one hostPath
is the root, running as root with only unlink's capabilities, whose ServiceAccount may only list the jobs."""

from __future__ import annotations

from typing import Any

import pytest

from ftspark import API_GROUP, PLURAL
from ftspark.app.sweeper import parse
from tests.helm.conftest import Render

SWEEPER = "ftspark-operator-local-state-sweeper"
ON = "localRecovery.sweeper.enabled=true"


def _named(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == SWEEPER]


def _rights(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_sweeper_is_off_by_default(render: Render) -> None:
    documents = render()
    assert not [d for d in documents if d["kind"] == "DaemonSet"]
    assert not [d for d in documents if SWEEPER in d["metadata"]["name"]]


def test_the_sweeper_mounts_only_its_root_and_holds_only_what_unlink_needs(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    (daemonset,) = _named(render(ON, "localRecovery.sweeper.root=/data/ftspark/"), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SWEEPER
    assert pod["volumes"] == [
        {"name": "local-state", "hostPath": {"path": "/data/ftspark", "type": "DirectoryOrCreate"}}
    ], "the root is the one hostPath, nothing else of the node"
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert pod["securityContext"]["runAsUser"] == 0, "it deletes what executors wrote"
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "ftspark.app.sweeper"]
    assert container["volumeMounts"] == [{"name": "local-state", "mountPath": "/data/ftspark"}]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["DAC_OVERRIDE", "FOWNER"]}
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert not security.get("privileged")
    # What the chart passes is what the sweeper reads: the same root, bound and namespaces.
    for variable in container["env"]:
        if "value" in variable:
            monkeypatch.setenv(variable["name"], variable["value"])
    cfg = parse([])
    assert (cfg.root, cfg.max_bytes_per_job, cfg.watch_namespaces) == ("/data/ftspark", 50 * 2**30, ("jobs",))
    assert (cfg.interval_seconds, cfg.grace_seconds, cfg.probe_port) == (300, 600, 8080)


def test_the_sweeper_may_only_list_jobs_in_the_watched_namespaces(render: Render) -> None:
    documents = render(ON, "watchNamespaces={jobs,team}")
    assert not _named(documents, "ClusterRole"), "namespaced mode: a Role per watched namespace"
    roles = _named(documents, "Role")
    assert {r["metadata"]["namespace"] for r in roles} == {"jobs", "team"}
    for role in roles:
        assert _rights(role["rules"]) == {(API_GROUP, PLURAL, "list")}
    bindings = _named(documents, "RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"jobs", "team"}
    for binding in bindings:
        assert binding["roleRef"]["name"] == SWEEPER
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SWEEPER, "namespace": "ftspark-system"}
        ]
    # Nothing else binds the sweeper's ServiceAccount.
    others = [
        d
        for d in documents
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding") and d["metadata"]["name"] != SWEEPER
    ]
    assert all(SWEEPER not in str(d["subjects"]) for d in others)


def test_cluster_wide_the_sweeper_lists_jobs_everywhere_and_nothing_else(render: Render) -> None:
    documents = render(ON, "rbac.clusterWide=true")
    (role,) = _named(documents, "ClusterRole")
    assert _rights(role["rules"]) == {(API_GROUP, PLURAL, "list")}
    (binding,) = _named(documents, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SWEEPER, "namespace": "ftspark-system"}]
    assert not _named(documents, "Role")
    (daemonset,) = _named(documents, "DaemonSet")
    env = {e["name"]: e.get("value") for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FTSPARK_WATCH_NAMESPACES"] == "", "every namespace's jobs"


def test_the_nodes_root_is_refused_as_the_sweepers_root(render: Render) -> None:
    with pytest.raises(AssertionError, match=r"no localRecovery root|does not match pattern"):
        render(ON, "localRecovery.sweeper.root=/")


def test_no_selector_of_the_operator_takes_the_sweepers_pods_for_replicas(render: Render) -> None:
    """The operator's Deployment, PodDisruptionBudget, Service and anti-affinity select its replicas by label:
    a sweeper pod on every node that matched would count as a replica (the PDB would let both real ones be
    evicted, the anti-affinity would see a replica on every node)."""
    documents = render(ON)
    (daemonset,) = _named(documents, "DaemonSet")
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (pdb,) = [d for d in documents if d["kind"] == "PodDisruptionBudget"]
    (service,) = [d for d in documents if d["kind"] == "Service"]
    affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    selectors = {
        "Deployment": deployment["spec"]["selector"]["matchLabels"],
        "PodDisruptionBudget": pdb["spec"]["selector"]["matchLabels"],
        "Service": service["spec"]["selector"],
        **{
            f"anti-affinity {i}": term["podAffinityTerm"]["labelSelector"]["matchLabels"]
            for i, term in enumerate(affinity["preferredDuringSchedulingIgnoredDuringExecution"])
        },
    }
    for owner, selector in selectors.items():
        assert not selector.items() <= labels.items(), f"the operator's {owner} selects the sweeper's pods"
    assert labels["app.kubernetes.io/instance"] == "ftspark-operator", "still this release's"
