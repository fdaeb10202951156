"""The operator never runs a job in its own namespace, where a driver's Role (pods create, ConfigMaps and
Leases update) would reach its Lease, results, term floor and record key. The chart's refusals are in
tests/helm/test_chart.py, the reconciler's (InvalidSpec, no pod) in tests/unit/test_reconciler.py."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from kubernetes import client

from ftspark.adapters.k8s.cluster import KubeDrivers
from ftspark.app.config import parse
from ftspark.ports.cluster import ObjectRejectedError
from ftspark.protocol import term_floor_name
from tests.unit.test_manifests import plan


def test_the_operator_refuses_to_manage_its_own_namespace() -> None:
    with pytest.raises(SystemExit):
        parse(["--namespace=ops", "--watch-namespaces=jobs,ops"])
    assert parse(["--namespace=ops", "--watch-namespaces=jobs"]).watch_namespaces == ("jobs",)
    assert parse(["--namespace=ops"]).watch_namespaces == (), "cluster-wide: the reconciler refuses there"


def test_no_driver_nor_its_rights_are_ever_made_in_the_operators_namespace() -> None:
    """Behind the reconciler's refusal: even asked to, the drivers' adapter makes nothing there."""
    drivers = KubeDrivers(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))
    drivers._core = core = mock.MagicMock()  # no request may leave
    drivers._rbac = rbac = mock.MagicMock()
    drivers._networking = networking = mock.MagicMock()
    attempt = replace(plan(), namespace="ops", term_floor=f"ops/{term_floor_name('ftspark-operator')}")

    with pytest.raises(ObjectRejectedError, match="the operator's own namespace ops runs no jobs"):
        drivers.create(attempt)

    assert core.mock_calls == rbac.mock_calls == networking.mock_calls == []
