"""The driver reaches the API server at the address its pod is given."""

from __future__ import annotations

from pathlib import Path

from ftspark.protocol import IN_CLUSTER_MASTER
from ftspark.runtime.session import in_cluster_master, spark_settings


def test_pod_environment_wins_over_the_portable_name() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert in_cluster_master(IN_CLUSTER_MASTER, env) == "k8s://https://10.0.0.1:6443"
    assert in_cluster_master(IN_CLUSTER_MASTER, {}) == IN_CLUSTER_MASTER
    assert in_cluster_master("local[2]", env) == "local[2]", "a user's own master is left alone"


def test_executors_are_told_the_drivers_pod_ip() -> None:
    env = {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3",
    }
    settings = spark_settings({"spark.master": IN_CLUSTER_MASTER}, "s3://b/c", Path("/jars"), env)
    assert settings["spark.driver.host"] == "10.1.2.3"
    assert settings["spark.driver.bindAddress"] == "10.1.2.3"
    assert "spark.driver.host" not in spark_settings(
        {"spark.master": "local[2]"}, "s3://b/c", Path("/jars"), env
    )
