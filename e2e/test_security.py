"""A job's pods and its driver's rights, with real Spark: read-only roots, Spark's RPC authentication with the
attempt's Secret, its NetworkPolicy, and what the driver's ServiceAccount really asks of the API server."""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from pathlib import Path

import pytest
from kubernetes import client
from tests.waiting import eventually

from ftspark.manifests import DRIVER_RULES
from ftspark.protocol import DRIVER_PORT, attempt_secret_name, executor_selector, spark_app_id
from ftspark_dev.subjects.windowed_counts import Output, expected_counts, write_input
from ftspark_dev.worlds.process_nodes import DRIVER_USER, JOBS_NAMESPACE, World

# Spark's transport frames (org.apache.spark.network.protocol): an 8-byte frame length (itself included), a
# type byte, the message. RpcRequest: request id and body size, then the body; RpcFailure: request id and an
# error string (length, UTF-8).
RPC_REQUEST, RPC_RESPONSE, RPC_FAILURE = 3, 4, 5


def speak_spark_rpc_without_the_secret(host: str, port: int) -> str:
    """An RPC request to the driver from a client that skips authentication: the driver's answer to it."""
    body = b"\x00not an authentication message"
    request = struct.pack(">bqi", RPC_REQUEST, 7, len(body)) + body
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(struct.pack(">q", 8 + len(request)) + request)
        header = connection.recv(9, socket.MSG_WAITALL)
        if not header:
            return "connection closed"
        length, kind = struct.unpack(">qb", header)
        payload = connection.recv(length - 9, socket.MSG_WAITALL)
    assert kind != RPC_RESPONSE, "the driver answered a client that did not authenticate"
    assert kind == RPC_FAILURE, f"unexpected message type {kind}"
    (size,) = struct.unpack(">i", payload[8:12])
    return payload[12 : 12 + size].decode()


def driver_requests(world: World) -> dict[tuple[str, str], set[int]]:
    """(verb, resource[/subresource]) → the HTTP codes of the driver's ServiceAccount's requests so far."""
    used: dict[tuple[str, str], set[int]] = {}
    for event in world.plane.audit_events():
        if event["user"]["username"] != DRIVER_USER:
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", event["requestURI"])
        if ref.get("subresource"):
            resource += f"/{ref['subresource']}"
        used.setdefault((event["verb"], resource), set()).add(event["responseStatus"]["code"])
    return used


def allowed(verb: str, resource: str) -> bool:
    return any(resource in rule["resources"] and verb in rule["verbs"] for rule in DRIVER_RULES)


@pytest.mark.timeout(900)
def test_a_job_runs_with_rpc_auth_a_read_only_root_and_only_the_rights_it_uses(
    world: World, tmp_path: Path
) -> None:
    core, name = client.CoreV1Api(world.api), "guarded"
    source, output = tmp_path / "in", Output(tmp_path / "out")
    write_input(source, 2)
    started = time.monotonic()
    job = world.job(name, source, output.folder)
    job["spec"]["sparkConf"]["spark.network.crypto.enabled"] = "true"  # AES on the wire, as a user asks
    world.create(job)
    eventually(
        lambda: output.folder.exists() and output.counts() == expected_counts(2),
        timeout=300,
        what=lambda: f"the files counted\n{world.log(f'{name}-1-driver')[-3000:]}",
    )
    print(f"\nsubmit -> files counted in {time.monotonic() - started:.1f} s")

    # Driver and executor ran with read-only roots (process-backed nodes enforce it) and authenticated RPC.
    driver = world.drivers(name)[-1]
    selector = executor_selector(spark_app_id(world.uid(name), 1))
    executors = core.list_namespaced_pod(JOBS_NAMESPACE, label_selector=selector).items
    assert executors, "the executor registered with the driver"
    executor = executors[0]
    for pod in (driver, executor):
        container = pod.spec.containers[0]
        assert container.security_context.read_only_root_filesystem
        print(f"{pod.metadata.name}: resources {container.resources.to_dict()}")
    conf = json.loads(next(e.value for e in driver.spec.containers[0].env if e.name == "FTSPARK_SPARK_CONF"))
    assert (conf["spark.authenticate"], conf["spark.network.crypto.enabled"]) == ("true", "true")
    # Spark's Kubernetes backend would put a generated secret into the executors' env: ours is a reference.
    (variable,) = (e for e in executor.spec.containers[0].env if e.name == "_SPARK_AUTH_SECRET")
    assert variable.value is None
    assert variable.value_from.secret_key_ref.name == attempt_secret_name(driver.metadata.name)
    # Spark's key is the file's content in base64: the Secret's data as the API server returns it.
    secret = core.read_namespaced_secret(attempt_secret_name(driver.metadata.name), JOBS_NAMESPACE)
    spark_key = secret.data["secret"]
    raw = base64.b64decode(spark_key)
    seen = [
        json.dumps(world.api.sanitize_for_serialization(driver)),
        json.dumps(world.api.sanitize_for_serialization(executor)),
        json.dumps(world.status(name)),
        world.log(driver.metadata.name),
        world.log(executor.metadata.name),
    ]
    assert not any(spark_key in text or raw.hex() in text for text in seen), "the RPC secret leaked"

    # A stranger speaking Spark's RPC without the secret: Spark's authentication layer takes a connection's
    # first message as the start of a handshake (its own, else SASL's) and refuses anything else, so the
    # request never reaches an RPC endpoint.
    refusal = speak_spark_rpc_without_the_secret(driver.status.pod_ip, DRIVER_PORT)
    print(f"a client without the secret: {refusal.splitlines()[0]}")
    assert "Expected SaslMessage" in refusal
    policy = client.NetworkingV1Api(world.api).read_namespaced_network_policy(
        driver.metadata.name, JOBS_NAMESPACE
    )
    assert policy.spec.pod_selector.match_labels["ftspark.io/attempt"] == "1"

    # A lost executor (Spark deletes its pod and asks for another), then a stop; then everything the driver's
    # ServiceAccount asked for.
    assert world.kill_pods(selector) == [executor.metadata.name]

    def replaced() -> bool:
        names = {
            p.metadata.name for p in core.list_namespaced_pod(JOBS_NAMESPACE, label_selector=selector).items
        }
        return bool(names) and executor.metadata.name not in names

    eventually(replaced, timeout=120, what="the lost executor's pod deleted and another asked for")
    world.patch(name, {"desiredState": "stopped"})
    eventually(lambda: world.status(name).get("phase") == "Stopped", timeout=180, what="Stopped")
    eventually(
        lambda: not core.list_namespaced_pod(JOBS_NAMESPACE, label_selector=selector).items,
        timeout=120,
        what="the executors gone with their driver",
    )
    used = driver_requests(world)
    print("the driver's requests (verb, resource: HTTP codes):")
    for (verb, resource), codes in sorted(used.items(), key=lambda item: (item[0][1], item[0][0])):
        print(f"  {verb} {resource}: {sorted(codes)}")
    assert used, "the audit log has the driver's requests"
    refused = {use for use, codes in used.items() if 403 in codes}
    # Spark's bulk clean-up at stop is the one call refused on purpose (DRIVER_RULES says why).
    assert refused <= {("deletecollection", "pods")}, refused
    assert all(allowed(verb, resource) for verb, resource in set(used) - refused), "DRIVER_RULES grant it"
    world.delete(name)
