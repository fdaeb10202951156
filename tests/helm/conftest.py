"""Helm itself (built once per machine by tools/helm/build.sh) and a way to render the chart."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ftspark_dev.cluster.processes import REPO_ROOT, built_by

CHART = REPO_ROOT / "helm" / "ftspark-operator"
KUBE_VERSION = "1.34.12"

Render = Callable[..., list[dict[str, Any]]]


def helm_binary() -> Path:
    """Helm, built once per machine (cached)."""
    return built_by(REPO_ROOT / "tools" / "helm" / "build.sh")


@pytest.fixture(scope="session")
def helm() -> Path:
    return helm_binary()


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    def render_chart(*values: str, namespace: str = "ftspark-system") -> list[dict[str, Any]]:
        """The chart as a user installs it: namespaced mode needs the namespaces of jobs (here "jobs")."""
        chosen = any(value.startswith(("watchNamespaces=", "rbac.clusterWide=true")) for value in values)
        flags = [f"--set={value}" for value in (*values, *([] if chosen else ["watchNamespaces={jobs}"]))]
        result = run_helm(
            helm,
            "template",
            "ftspark-operator",
            str(CHART),
            f"--namespace={namespace}",
            f"--kube-version={KUBE_VERSION}",
            *flags,
        )
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return render_chart
