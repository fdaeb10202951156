"""The driver's answers to the operator (a savepoint taken, checkpoints rolled back) are annotations on its
pod: one call that fails on a busy or briefly unreachable API server must not lose one (a savepoint on S3
that no status names)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from ftspark.protocol import SAVEPOINT_ANNOTATION
from ftspark.runtime import control
from ftspark.runtime.control import ControlWatcher
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.netproxy import ApiProxy

CUT_SECONDS = 6.0  # longer than one call's own tries (urllib3 retries a failed connect 3 times)


def test_an_answer_survives_a_link_cut_for_a_few_seconds(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core = client.CoreV1Api(api_client)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="answering-driver"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="driver", image="driver:1")]),
    )
    core.create_namespaced_pod(namespace, pod)
    proxy = ApiProxy(control_plane.apiserver_port)
    through_proxy = config.new_client_from_config(
        config_file=str(proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "driver.kubeconfig"))
    )
    monkeypatch.setattr(control, "_TIMEOUT", (1.0, 1.0))  # a cut call fails in a second, not ten
    # Only its annotate is used here: it is never started, so it carries out no request.
    watcher = ControlWatcher(through_proxy, namespace, "answering-driver", 60, bool, (namespace, "floor"))
    answer = json.dumps({"id": "sp-1-a1", "location": "s3://bucket/savepoints/sp-1-a1", "batches": {}})
    proxy.partition()
    healing = threading.Timer(CUT_SECONDS, proxy.heal)
    healing.start()
    started = time.monotonic()
    try:
        watcher.annotate(SAVEPOINT_ANNOTATION, answer)
    finally:
        healing.cancel()
        proxy.close()
    took = time.monotonic() - started
    annotations = core.read_namespaced_pod("answering-driver", namespace).metadata.annotations or {}
    assert annotations.get(SAVEPOINT_ANNOTATION) == answer, "the answer was lost to the cut link"
    assert took >= CUT_SECONDS, "the link was cut while the driver answered"
    print(f"\nanswer written {took:.1f} s after the first try, the link cut for {CUT_SECONDS:.0f} s")
