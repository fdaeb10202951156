"""The CLI's failures are one line a person can act on, never a traceback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ftspark.cli import main
from ftspark_dev.cluster.processes import REPO_ROOT

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u, namespace: team-a}}}}]
current-context: x
"""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_no_kubeconfig_and_no_pod_says_where_a_cluster_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["--kubeconfig", str(tmp_path / "missing"), "status", "counts"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ftspark: no cluster to talk to:") and "KUBECONFIG" in err, err
    assert "Traceback" not in err and err.count("\n") == 1


def test_an_api_server_that_does_not_answer_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(KUBECONFIG.format(port=port))
    assert main(["--kubeconfig", str(kubeconfig), "stop", "counts"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ftspark: cannot reach the API server at https://127.0.0.1:{port}"), err
    assert "Traceback" not in err and err.count("\n") == 1


def test_the_cli_runs_with_the_base_install_alone() -> None:
    """`pip install ftspark` is the CLI: it imports none of the extras' packages (pyspark, boto3, kopf, ...),
    checked in a fresh interpreter where importing any of them fails."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = {
        re.split(r"[<>=\[ ]", requirement)[0]
        for name in ("operator", "driver", "spark")
        for requirement in project["optional-dependencies"][name]
    }
    modules = {package.replace("-", "_") for package in extras}
    assert modules >= {"pyspark", "boto3", "kopf"}, modules
    blocker = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(modules)!r}:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        "from ftspark.cli import main\n"
        "sys.exit(main(['logs', '--help']))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", blocker],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "operator")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0 and "--attempt" in ran.stdout, ran.stderr
