"""The CLI's failures are one line a person can act on, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ftspark.cli import main

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
