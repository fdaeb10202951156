"""A node agent with two process-backed nodes on the session's cluster (scheduler and controller-manager)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.nodes import NodeAgent


@pytest.fixture
def agent(cluster: ControlPlane) -> Iterator[NodeAgent]:
    nodes = NodeAgent(cluster.kubeconfig, nodes=2, prefix=f"n{uuid.uuid4().hex[:6]}").start()
    try:
        yield nodes
    finally:
        nodes.stop()
