"""Faults the operator must ride out: an API server restart, an S3 outage, the leader cut off from the API."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from kubernetes import client, config

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.configmap_stores import configmap_stores
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.adapters.seal import RecordSeal
from ftspark.ports.leadership import LeaderElectionRecord, LockUnavailableError
from ftspark.ports.stores import StoreUnavailableError
from ftspark.testing.stores import MemoryBlobStore
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.netproxy import ApiProxy
from ftspark_dev.cluster.operators import OperatorFleet, job_manifest, pod_names
from ftspark_dev.cluster.s3server import S3Server
from tests.waiting import eventually


def _create(api: client.ApiClient, namespace: str, name: str, bucket: str) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest(name, bucket)
    )


def test_partitioned_leader_stops_acting_and_the_standby_takes_over(
    fleet: OperatorFleet, control_plane: ControlPlane, api_client: client.ApiClient, tmp_path: Path
) -> None:
    proxy = ApiProxy(control_plane.apiserver_port)
    try:
        cut_off = fleet.start(
            "cut-off", kubeconfig=proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "p.kubeconfig")
        )
        eventually(
            lambda: fleet.leader(api_client) == "cut-off", timeout=30, what="the proxied replica leads"
        )
        standby = fleet.start("standby")
        time.sleep(1)
        partitioned_at = time.monotonic()
        proxy.partition()
        process = fleet.replicas[cut_off]
        eventually(
            lambda: not process.running(), timeout=fleet.renew_deadline + 10, what="the cut-off leader exits"
        )
        stopped = time.monotonic() - partitioned_at
        eventually(lambda: fleet.leader(api_client) == standby, timeout=30, what="the standby leads")
        took_over = time.monotonic() - partitioned_at
        print(
            f"partition -> old leader stopped acting in {stopped:.1f} s, standby leads in {took_over:.1f} s"
        )
        assert stopped <= fleet.renew_deadline + fleet.retry_period + 2  # a request may be in flight
        assert took_over >= stopped, "never two acting leaders"
    finally:
        proxy.close()


def test_a_standby_cut_off_from_the_api_server_is_not_ready_but_alive(
    fleet: OperatorFleet, control_plane: ControlPlane, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """Readiness follows contact with the API server (it could not take over); liveness does not (a
    restart would not help a follower whose network is down)."""
    proxy = ApiProxy(control_plane.apiserver_port)
    try:
        leader = fleet.start()
        eventually(lambda: fleet.leader(api_client) == leader, timeout=30, what="a leader")
        standby = fleet.start(
            "standby", kubeconfig=proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "p.kubeconfig")
        )
        eventually(lambda: fleet.probe(standby, "/readyz")[0] == 200, timeout=30, what="standby ready")
        proxy.partition()
        eventually(
            lambda: fleet.probe(standby, "/readyz")[0] == 503,
            timeout=fleet.lease_duration + 10,
            what="standby not ready while cut off",
        )
        assert fleet.probe(standby, "/healthz") == (200, "following")
        proxy.heal()
        eventually(lambda: fleet.probe(standby, "/readyz")[0] == 200, timeout=30, what="ready again")
    finally:
        proxy.close()


def test_operator_rides_out_an_api_server_restart(
    fleet: OperatorFleet, control_plane: ControlPlane, api_client: client.ApiClient, bucket: str
) -> None:
    # Production timings: a restart of a few seconds fits in the renew deadline, so the leader keeps leading.
    fleet.lease_duration, fleet.renew_deadline, fleet.retry_period = 15, 10.0, 2.0
    leader = fleet.start()
    ns = fleet.watch_namespace
    _create(api_client, ns, "before", bucket)
    eventually(lambda: pod_names(api_client, ns, "before") == ["before-1-driver"], timeout=30, what="driver")

    control_plane.restart_apiserver(
        down_seconds=2
    )  # shorter than the renew deadline: the leader keeps leading
    _create(api_client, ns, "after", bucket)
    eventually(
        lambda: pod_names(api_client, ns, "after") == ["after-1-driver"],
        timeout=60,
        what=lambda: f"reconciling after the restart\n{fleet.logs()}",
    )
    assert fleet.replicas[leader].running()
    assert pod_names(api_client, ns, "before") == ["before-1-driver"], "nothing was submitted twice"


def test_s3_outage_times_out_and_recovers(s3_server: S3Server) -> None:
    bucket = f"o-{uuid.uuid4().hex[:8]}"
    s3 = s3_server.client()
    s3.create_bucket(Bucket=bucket)
    impatient = s3_server.client(
        config=Config(connect_timeout=1, read_timeout=1, retries={"max_attempts": 1})
    )
    s3_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises((BotoCoreError, ClientError)):
            impatient.put_object(Bucket=bucket, Key="k", Body=b"v")
        assert time.monotonic() - started < 10
    finally:
        s3_server.resume()
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"


def test_calls_through_a_partition_time_out_instead_of_hanging(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    proxy = ApiProxy(control_plane.apiserver_port)
    try:
        configuration = client.Configuration()
        config.load_kube_config(
            config_file=str(proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "p.kubeconfig")),
            client_configuration=configuration,
        )
        configuration.retries = 0
        api = client.ApiClient(configuration)
        lock = KubernetesLeaseLock(api, namespace=namespace, name="lock", identity="me", request_timeout=1.0)
        record = LeaderElectionRecord("me", 15, datetime.now(UTC), datetime.now(UTC), 0)
        version = lock.create(record)
        stores = configmap_stores(
            api,
            MemoryBlobStore(),
            RecordSeal(RecordSeal.new_key()),
            results_namespace=namespace,
            request_timeout=1.0,
        )
        proxy.partition()
        for call in (
            lambda: lock.update(record, version),
            lambda: lock.get(),
            lambda: stores.results.entries(),
        ):
            started = time.monotonic()
            with pytest.raises((LockUnavailableError, StoreUnavailableError)):
                call()
            assert time.monotonic() - started < 5, "a bounded call, not a hang"
    finally:
        proxy.close()
