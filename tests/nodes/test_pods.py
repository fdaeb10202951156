"""Pods on process-backed nodes: placement by the real scheduler, env, volumes, exit codes, deletion,
in-cluster clients and a killed node."""

from __future__ import annotations

import os
import time

from kubernetes import client

from ftspark_dev.nodes import NodeAgent
from tests.nodes.pods import phase, python_pod, wait_phase
from tests.waiting import eventually


def test_pod_runs_on_the_node_its_affinity_names_with_downward_env(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    target = agent.nodes[1]
    script = """
        import os, time
        names = ("POD_IP", "POD_NAME", "POD_NAMESPACE", "NODE_NAME")
        print("env", *(os.environ[name] for name in names))
        print("pid", os.getpid(), flush=True)
        open("/scratch/hello", "w").write("hi")
        time.sleep(600)
    """
    manifest = python_pod("placed", script, node=target.name)
    manifest["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    created = time.monotonic()
    core.create_namespaced_pod(namespace, manifest)
    pod = wait_phase(core, namespace, "placed", "Running")
    running = time.monotonic() - created

    assert pod.spec.node_name == target.name
    assert pod.status.pod_ip == target.ip == pod.status.host_ip
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["Ready"] == conditions["ContainersReady"] == conditions["PodScheduled"] == "True"
    assert pod.status.container_statuses[0].state.running.started_at is not None
    line = eventually(
        lambda: next((x for x in agent.log(namespace, "placed").splitlines() if x.startswith("pid")), None),
        timeout=20,
    )
    pid = int(line.split()[1])
    assert f"env {target.ip} placed {namespace} {target.name}" in agent.log(namespace, "placed")
    with open(f"/proc/{pid}/environ", "rb") as environ:
        assert b"POD_NAME=placed" in environ.read().split(b"\0")
    # The emptyDir is a directory of the node, seen by the process at its mountPath only.
    written = eventually(lambda: list(target.root.glob("pods/*/volumes/scratch/hello")), timeout=10)
    assert written[0].read_text() == "hi"
    assert not os.path.exists("/scratch/hello")
    print(f"pod created → Running: {running:.2f} s")


def test_exit_code_and_termination_message(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    script = """
        import os, sys
        open(os.environ["FTSPARK_TERMINATION_LOG"], "w").write("checkpoint 7 lost")
        sys.exit(3)
    """
    core.create_namespaced_pod(namespace, python_pod("fails", script))
    pod = wait_phase(core, namespace, "fails", "Failed")

    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason, terminated.message) == (3, "Error", "checkpoint 7 lost")


def test_read_only_root_leaves_volumes_writable_and_a_tmp_volume_is_the_temp_dir(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    script = """
        import os, tempfile
        for path in ("/var/ftspark-ro-probe", "/work/out/x", tempfile.gettempdir() + "/x"):
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError as error:
                print("refused", path, error.strerror)
        print("tmpdir", tempfile.gettempdir())
        open(os.environ["FTSPARK_TERMINATION_LOG"], "w").write("done")
    """
    manifest = python_pod("read-only", script)
    container = manifest["spec"]["containers"][0]
    container["securityContext"] = {"readOnlyRootFilesystem": True}
    manifest["spec"]["volumes"] = [{"name": "out", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
    container["volumeMounts"] = [
        {"name": "out", "mountPath": "/work/out"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    core.create_namespaced_pod(namespace, manifest)
    pod = wait_phase(core, namespace, "read-only", "Succeeded")

    log = agent.log(namespace, "read-only")
    assert "refused /var/ftspark-ro-probe Read-only file system" in log
    assert "wrote /work/out/x" in log
    tmpdir = next(line.split()[1] for line in log.splitlines() if line.startswith("tmpdir"))
    assert tmpdir.endswith("/volumes/tmp"), "a volume at /tmp is the container's temp dir"
    assert f"wrote {tmpdir}/x" in log
    assert pod.status.container_statuses[0].state.terminated.message == "done"
    assert not os.path.exists("/var/ftspark-ro-probe")


def test_fallback_to_logs_on_error(agent: NodeAgent, api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    manifest = python_pod("crashes", "import sys; print('first'); print('last words'); sys.exit(1)")
    manifest["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError"
    core.create_namespaced_pod(namespace, manifest)
    pod = wait_phase(core, namespace, "crashes", "Failed")

    assert pod.status.container_statuses[0].state.terminated.message.endswith("last words")


def test_a_container_ends_with_everything_it_started(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    """The operator takes a terminated driver container for a dead driver (it releases the driver's Lease):
    as in runc's PID namespace, no process of the container may outlive the report. The child here left the
    process group and would otherwise run for 10 minutes."""
    core = client.CoreV1Api(api_client)
    script = """
        import subprocess, sys, time
        child = subprocess.Popen(["sleep", "600"], start_new_session=True)
        print("child", child.pid, flush=True)
        time.sleep(1)
        sys.exit(1)
    """
    core.create_namespaced_pod(namespace, python_pod("leaves-a-child", script))
    pod = wait_phase(core, namespace, "leaves-a-child", "Failed")

    assert pod.status.container_statuses[0].state.terminated.exit_code == 1
    line = next(x for x in agent.log(namespace, "leaves-a-child").splitlines() if x.startswith("child"))
    child = int(line.split()[1])
    assert not _alive(child), "the container's child outlived the terminated report"


def _alive(pid: int) -> bool:
    """Running, and not a zombie left for its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_deleted_pod_gets_sigterm_then_is_gone(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    script = """
        import os, signal, sys, time
        def stop(signum, frame):
            open("/data/signal", "w").write(str(signum))
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        print("pid", os.getpid(), flush=True)
        time.sleep(600)
    """
    manifest = python_pod("deleted", script, node=agent.nodes[0].name)
    manifest["spec"]["volumes"] = [{"name": "data", "hostPath": {"path": "/data/deleted"}}]
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    core.create_namespaced_pod(namespace, manifest)
    wait_phase(core, namespace, "deleted", "Running")
    line = eventually(
        lambda: next((x for x in agent.log(namespace, "deleted").splitlines() if x.startswith("pid")), None),
        timeout=20,
    )
    pid = int(line.split()[1])

    core.delete_namespaced_pod("deleted", namespace)
    eventually(lambda: phase(core, namespace, "deleted") is None, timeout=30, what="the pod object is gone")

    assert not os.path.exists(f"/proc/{pid}")
    # hostPath volumes live under the node's root; the handler there saw SIGTERM (15).
    assert (agent.nodes[0].root / "host" / "data" / "deleted" / "signal").read_text() == "15"


def test_in_cluster_client_reads_its_own_pod(
    agent: NodeAgent, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    )
    eventually(lambda: core.list_namespaced_service_account(namespace).items, timeout=30, what="default SA")
    eventually(lambda: core.list_namespaced_config_map(namespace).items, timeout=30, what="kube-root-ca.crt")
    script = """
        import json, os, ssl, urllib.request
        sa = "/var/run/secrets/kubernetes.io/serviceaccount"
        token = open(f"{sa}/token").read()
        namespace = open(f"{sa}/namespace").read()
        context = ssl.create_default_context(cafile=f"{sa}/ca.crt")
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        url = f"https://{host}:{port}/api/v1/namespaces/{namespace}/pods/{os.environ['HOSTNAME']}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        pod = json.load(urllib.request.urlopen(request, context=context))
        print("read", pod["metadata"]["name"], pod["status"]["podIP"])
    """
    manifest = python_pod("incluster", script, serviceAccountName="default")
    # What the ServiceAccount admission plugin adds to every pod (it is off in the test fixture).
    manifest["spec"]["volumes"] = [
        {
            "name": "kube-api-access",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                        }
                    },
                ]
            },
        }
    ]
    manifest["spec"]["containers"][0]["volumeMounts"] = [
        {
            "name": "kube-api-access",
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "readOnly": True,
        }
    ]
    core.create_namespaced_pod(namespace, manifest)
    pod = wait_phase(core, namespace, "incluster", "Succeeded")

    assert f"read incluster {pod.status.pod_ip}" in agent.log(namespace, "incluster")
