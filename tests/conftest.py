"""Fixtures shared by the whole suite: a real control plane and an S3-protocol server on loopback.

Both start once per session on free loopback ports; every process they start dies with the test run
(PR_SET_PDEATHSIG) and their temporary directories are removed at the end, also after failures.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ftspark import API_GROUP, PLURAL
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.cluster.s3server import S3Server


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    plane = ControlPlane()
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with kube-scheduler and kube-controller-manager running too."""
    control_plane.start_controllers()
    return control_plane


@pytest.fixture(scope="session")
def crd(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{API_GROUP}")


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(control_plane.kubeconfig))


@contextlib.contextmanager
def fresh_namespace(api_client: client.ApiClient) -> Iterator[str]:
    """A new namespace for the block; deletion is not awaited (without a controller-manager it never ends)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    """A fresh namespace per test."""
    with fresh_namespace(api_client) as name:
        yield name


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """A fresh bucket on the S3 server."""
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return name
