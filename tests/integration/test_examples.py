"""The shipped examples/ manifests are valid for the real API server: the custom resource itself, and the
driver pod, Service and executor template the operator builds from it (server-side dry runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.domain.models import JobSpec
from ftspark.domain.policy import violations
from ftspark.manifests import (
    AttemptPlan,
    attempt_secret,
    driver_pod,
    spark_conf,
)
from ftspark_dev.cluster.processes import REPO_ROOT

EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))


def test_there_are_a_streaming_and_a_batch_example() -> None:
    assert {path.name for path in EXAMPLES} >= {"windowed-counts.yaml", "batch-report.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_and_the_pods_built_from_it_are_accepted(
    path: Path, crd: None, api_client: client.ApiClient, namespace: str
) -> None:
    manifest = yaml.safe_load(path.read_text())
    accepted = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, manifest, dry_run="All"
    )
    spec = JobSpec.model_validate(accepted["spec"])  # with the schema's defaults, as the operator reads it
    assert violations(spec) == [], "the examples need no allowance of the job policy"
    plan = AttemptPlan(
        namespace=namespace,
        job_name=manifest["metadata"]["name"],
        job_uid=accepted["metadata"]["uid"] or "00000000-0000-0000-0000-000000000000",
        attempt=1,
        spec=spec,
        checkpoint_location=f"{spec.checkpoint.storage}/checkpoints/run-1",
        restore_from="nothing",
    )
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, driver_pod(plan), dry_run="All")
    core.create_namespaced_secret(namespace, attempt_secret(plan, b"key", b"checkpoint-key"), dry_run="All")
    # Credentials come from a Secret by reference: no value of theirs is in the spec or Spark's conf.
    conf = spark_conf(plan)
    assert not any("secret.key" in key or "access.key" in key for key in conf), conf
    for variable in spec.env:
        if variable.name.startswith("AWS_"):
            assert variable.secret_key_ref is not None
            assert conf[f"spark.kubernetes.executor.secretKeyRef.{variable.name}"]
