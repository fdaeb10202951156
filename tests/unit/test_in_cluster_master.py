"""The driver reaches the API server at the address its pod is given."""

from __future__ import annotations

from ftspark.domain.driver_pod import IN_CLUSTER_MASTER
from ftspark.runtime.session import in_cluster_master


def test_pod_environment_wins_over_the_portable_name() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert in_cluster_master(IN_CLUSTER_MASTER, env) == "k8s://https://10.0.0.1:6443"
    assert in_cluster_master(IN_CLUSTER_MASTER, {}) == IN_CLUSTER_MASTER
    assert in_cluster_master("local[2]", env) == "local[2]", "a user's own master is left alone"
