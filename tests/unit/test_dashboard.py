"""The Grafana dashboard and the chart's alert rules ask only for metrics the operator exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import ftspark.metrics  # noqa: F401 - registers the operator's metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "ftspark.json"
ALERT_RULES = ROOT / "helm" / "ftspark-operator" / "templates" / "prometheusrule.yaml"
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def _exposed() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return {name for name in names if name.startswith("ftspark_")}


def _exposed_with_suffixes() -> set[str]:
    return _exposed() | {f"{name}{suffix}" for name in _exposed() for suffix in _SUFFIXES}


def test_every_dashboard_query_uses_an_exposed_metric() -> None:
    exposed = _exposed_with_suffixes()
    panels = json.loads(DASHBOARD.read_text())["panels"]
    used = {name for p in panels for t in p["targets"] for name in re.findall(r"ftspark_[a-z_]+", t["expr"])}
    assert used, "the dashboard queries nothing"
    assert used <= exposed, f"not exposed: {sorted(used - exposed)}"
    assert {"ftspark_jobs", "ftspark_leader", "ftspark_job_checkpoint_age_seconds"} <= used


def test_every_alert_rule_uses_an_exposed_metric() -> None:
    used = set(re.findall(r"ftspark_[a-z_]+", ALERT_RULES.read_text()))
    assert {"ftspark_leader", "ftspark_job_phase", "ftspark_job_condition"} <= used
    assert used <= _exposed_with_suffixes(), f"not exposed: {sorted(used - _exposed_with_suffixes())}"
