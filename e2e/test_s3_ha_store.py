"""An installation that keeps its HA records on S3 (--ha-store=s3): a real job's graph, checkpoint pointers
and result are objects under the installation's root, and none of them is a ConfigMap.

It shares the session's control plane, nodes and S3 with the other tests, as a second installation: its
own operator namespace, Lease and jobs namespace."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.waiting import eventually

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.configmap_stores import RESULT_LABEL, STORE_LABEL
from ftspark.adapters.s3.stores import s3_stores
from ftspark.domain.ha import JobKey
from ftspark_dev.cluster.operators import OperatorFleet, job_status
from ftspark_dev.subjects.windowed_counts import write_input
from ftspark_dev.worlds.process_nodes import World, s3_credentials_secret

# A streaming query that commits a batch per input file and ends (exit 0) once the test says so.
UNTIL_DONE = """
import os, sys
from pyspark.sql import SparkSession

source, done = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.getOrCreate()
query = (
    spark.readStream.option("maxFilesPerTrigger", 1).text(source)
    .writeStream.format("noop").trigger(processingTime="200 milliseconds").start()
)
while not os.path.exists(done):
    query.awaitTermination(0.5)
query.stop()
"""


@pytest.fixture
def s3_installation(world: World) -> Iterator[OperatorFleet]:
    """A second installation on the world's cluster, with its HA records under s3://<bucket>/installation."""
    suffix = uuid.uuid4().hex[:6]
    core = client.CoreV1Api(world.api)
    namespaces = [f"s3ha-system-{suffix}", f"s3ha-jobs-{suffix}"]
    for name in namespaces:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_secret(namespaces[1], s3_credentials_secret())
    bucket = f"ftspark-ha-{suffix}"
    world.s3.client().create_bucket(Bucket=bucket)
    fleet = OperatorFleet(
        world.plane,
        world.s3,
        namespaces[0],
        namespaces[1],
        world.work / f"s3ha-{suffix}",
        ha_s3_root=f"s3://{bucket}/installation",
    )
    fleet.start(f"s3ha-{suffix}")
    try:
        yield fleet
    finally:
        fleet.stop_all()
        for name in namespaces:
            core.delete_namespace(name)


def _objects(world: World, root: str) -> list[str]:
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    listed = world.s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")
    return sorted(item["Key"].removeprefix(f"{prefix}/") for item in listed.get("Contents", []))


@pytest.mark.timeout(300)
def test_a_job_runs_with_its_ha_records_on_s3(
    world: World, s3_installation: OperatorFleet, tmp_path: Path
) -> None:
    fleet, root = s3_installation, s3_installation.ha_s3_root
    ns, name = fleet.watch_namespace, "on-s3"
    script, source, done = tmp_path / "until_done.py", tmp_path / "in", tmp_path / "done"
    script.write_text(UNTIL_DONE)
    write_input(source, 2)
    manifest = world.job(
        name, source, tmp_path, mainApplicationFile=f"local://{script}", arguments=[str(source), str(done)]
    )
    started = time.monotonic()
    client.CustomObjectsApi(world.api).create_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, manifest
    )

    def diagnosis() -> str:
        return f"{fleet.logs()}\n--- driver\n{world.nodes.log(ns, f'{name}-1-driver')[-4000:]}"

    # The status learns of a checkpoint while the job runs: on S3 the operator polls the records' ETags
    # (there is no ConfigMap to watch).
    def running_with_checkpoint() -> dict[str, Any] | None:
        status = job_status(world.api, ns, name)
        return status if status.get("phase") == "Running" and status.get("latestCheckpoint") else None

    status = eventually(running_with_checkpoint, timeout=180, what=diagnosis)
    print(f"\nsubmit -> Running with a checkpoint in status: {time.monotonic() - started:.1f} s")
    job = JobKey(namespace=ns, name=name)
    uid = client.CustomObjectsApi(world.api).get_namespaced_custom_object(
        API_GROUP, API_VERSION, ns, PLURAL, name
    )["metadata"]["uid"]
    stores = s3_stores(world.s3.client(), root, fleet.seal(world.api))
    graph = stores.job_graphs.get(job)
    assert graph is not None and graph.uid == uid
    pointers = stores.checkpoints.pointers(job)
    assert pointers and pointers[0].checkpoint_id >= status["latestCheckpoint"]["id"], pointers
    assert {f"graphs/{ns}/{name}/jobgraph.json", f"ha/{ns}/{name}/checkpoints.json"} <= set(
        _objects(world, root)
    )
    core = client.CoreV1Api(world.api)
    assert core.list_namespaced_config_map(ns, label_selector=STORE_LABEL).items == []

    # The script ends: the job succeeds, and its result (FLIP-194: dirty, then clean) is an object too.
    done.touch()
    eventually(
        lambda: job_status(world.api, ns, name).get("phase") == "Succeeded", timeout=120, what=diagnosis
    )
    result = eventually(lambda: stores.results.get(uid), timeout=30, what="the job's result on S3")
    assert result.state == "Succeeded" and result.clean, result
    assert f"results/{uid}.json" in _objects(world, root)
    assert core.list_namespaced_config_map(fleet.namespace, label_selector=RESULT_LABEL).items == []
    print(f"submit -> Succeeded, result on S3: {time.monotonic() - started:.1f} s")
