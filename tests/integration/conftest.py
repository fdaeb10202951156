"""Fixtures for tests that run real operator processes: the CRD, a bucket, and a fleet of replicas."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import OperatorFleet
from ftspark_dev.cluster.s3server import S3Server


@pytest.fixture
def fleet(
    crd: None, control_plane: ControlPlane, s3_server: S3Server, api_client: client.ApiClient, tmp_path: Path
) -> Iterator[OperatorFleet]:
    """Operator replicas (none started yet) for an operator namespace and a jobs namespace of their own."""
    core = client.CoreV1Api(api_client)
    names = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    for name in names:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    operators = OperatorFleet(control_plane, s3_server, names[0], names[1], tmp_path)
    yield operators
    operators.stop_all()
    for name in names:
        core.delete_namespace(name)
