"""Leader election against the real API server: the Lease adapter, and contender processes killed,
stopped and deposed, with the takeover times measured."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ftspark import API_GROUP, API_VERSION, PLURAL
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.domain.fencing import Epoch
from ftspark.leader.elector import LeaderElectionConfig, LeaderElector
from ftspark.ports.leadership import ConflictError, LeaderElectionRecord
from ftspark.protocol import driver_lease_name, job_owner_reference
from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.operators import job_manifest
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
LEASE = "ftspark-operator"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3, 2.0, 0.5
# A follower polls at most every RETRY_PERIOD * (1 + 1.2) (client-go's jitter): it may see the dead
# leader's last renew one poll late, and take over one poll after the lease ran out.
TAKEOVER_BOUND = LEASE_DURATION + 2 * RETRY_PERIOD * 2.2


@dataclass(frozen=True)
class Timers:
    lease_duration: int
    renew_deadline: float
    retry_period: float


SHORT = Timers(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
# For the tests whose property is that something does not wait for a timer (a release, a takeover seen at
# the next renew): timers far longer than the retry period tell "at once" from "at the timer" on a machine
# of any speed, and cost nothing when the property holds.
LONG = Timers(lease_duration=15, renew_deadline=10.0, retry_period=RETRY_PERIOD)
# For the test that waits for the renew deadline: a margin to the lease duration that a loaded machine's
# scheduling delays stay well inside.
WIDE = Timers(lease_duration=10, renew_deadline=6.0, retry_period=RETRY_PERIOD)


class Holders:
    """lease_holder processes sharing one event log; they die with the test run (pdeathsig)."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path) -> None:
        self._kubeconfig = kubeconfig
        self._namespace = namespace
        self.log = log
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, identity: str, kubeconfig: Path | None = None, timers: Timers = SHORT) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(str(REPO / part) for part in ("", "operator", "tools")),
        }
        argv = [
            *("setpriv", "--pdeathsig", "KILL", "--", sys.executable, "-m", "tests.integration.lease_holder"),
            *("--kubeconfig", str(kubeconfig or self._kubeconfig), "--namespace", self._namespace),
            *("--identity", identity, "--log", str(self.log), "--lease", LEASE),
            *("--lease-duration", str(timers.lease_duration)),
            *("--renew-deadline", str(timers.renew_deadline)),
            *("--retry-period", str(timers.retry_period)),
        ]
        with (self.log.parent / f"{identity}.log").open("ab") as output:
            self._processes[identity] = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def signal(self, identity: str, signum: signal.Signals) -> float:
        """Send signum; returns when it was sent."""
        sent = time.time()
        self._processes[identity].send_signal(signum)
        return sent

    def exit_code(self, identity: str, timeout: float = 10.0) -> int:
        return self._processes[identity].wait(timeout)

    def events(self, identity: str, kind: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [line for line in lines if line["identity"] == identity and line["event"] == kind]

    def wait_for(self, identity: str, kind: str, timeout: float = 20.0) -> dict[str, Any]:
        def first() -> dict[str, Any] | None:
            found = self.events(identity, kind)
            return found[0] if found else None

        return eventually(
            first, timeout=timeout, interval=0.05, what=f"{identity} {kind}\n{self.output(identity)}"
        )

    def wait_until_following(self, identity: str, leader: str) -> None:
        eventually(
            lambda: any(line["leader"] == leader for line in self.events(identity, "new_leader")),
            timeout=20.0,
            interval=0.05,
            what=f"{identity} sees {leader} lead\n{self.output(identity)}",
        )

    def output(self, identity: str) -> str:
        return (self.log.parent / f"{identity}.log").read_text(errors="replace")[-3000:]

    def kill_all(self) -> None:
        for process in self._processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()


@pytest.fixture
def holders(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Holders]:
    running = Holders(control_plane.kubeconfig, namespace, tmp_path / "events.jsonl")
    try:
        yield running
    finally:
        running.kill_all()


def lease_spec(api_client: client.ApiClient, namespace: str) -> Any:
    return client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, namespace).spec


def test_lease_lock_creates_and_refuses_a_stale_update(api_client: client.ApiClient, namespace: str) -> None:
    lock = KubernetesLeaseLock(api_client, namespace=namespace, name=LEASE, identity="a", request_timeout=5.0)
    assert lock.get() is None
    # Whole seconds on purpose: datetime.isoformat() would drop the fraction that MicroTime requires.
    acquired = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = LeaderElectionRecord("a", 15, acquired, acquired, 0)
    created_version = lock.create(first)
    with pytest.raises(ConflictError):
        lock.create(first)

    renewed = LeaderElectionRecord("a", 15, acquired, datetime(2025, 1, 2, 3, 4, 7, 123456, tzinfo=UTC), 0)
    renewed_version = lock.update(renewed, created_version)
    assert lock.get() == (renewed, renewed_version)

    with pytest.raises(ConflictError):
        lock.update(LeaderElectionRecord("b", 15, acquired, acquired, 1), created_version)
    assert lock.get() == (renewed, renewed_version)
    spec = lease_spec(api_client, namespace)
    assert (spec.holder_identity, spec.lease_transitions, spec.lease_duration_seconds) == ("a", 0, 15)


def test_a_drivers_lease_goes_with_its_job_even_when_written_after_the_deletion(
    cluster: ControlPlane, crd: None, api_client: client.ApiClient, namespace: str
) -> None:
    """The driver's Lease carries an ownerReference to its job: the garbage collector deletes it with the
    job, and deletes it again when a driver still stopping writes it once more (uninstall leaves none)."""
    custom = client.CustomObjectsApi(api_client)
    job = custom.create_namespaced_custom_object(
        API_GROUP, API_VERSION, namespace, PLURAL, job_manifest("owned", "bucket")
    )
    lock = KubernetesLeaseLock(
        api_client,
        namespace=namespace,
        name=driver_lease_name("owned"),
        identity="owned-1-driver",
        request_timeout=5.0,
        owner=job_owner_reference("owned", job["metadata"]["uid"]),
    )
    now = datetime.now(UTC).replace(microsecond=0)
    record = LeaderElectionRecord("owned-1-driver", 15, now, now, 0)
    lock.create(record)
    custom.delete_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, "owned")
    eventually(lambda: lock.get() is None, timeout=30, what="the Lease deleted with its job")
    lock.create(record)
    eventually(lambda: lock.get() is None, timeout=30, what="written again, deleted again: its job is gone")


def test_a_killed_leader_is_replaced_after_the_lease_runs_out(
    holders: Holders, api_client: client.ApiClient, namespace: str
) -> None:
    holders.start("a")
    a_started = holders.wait_for("a", "started")
    holders.start("b")
    holders.wait_until_following("b", "a")

    killed = holders.signal("a", signal.SIGKILL)
    holders.exit_code("a")
    last_renew = lease_spec(api_client, namespace).renew_time.timestamp()
    b_started = holders.wait_for("b", "started")

    takeover = b_started["t"] - killed
    print(
        f"\nSIGKILLed leader: follower led {takeover:.2f} s after the kill, "
        f"{b_started['t'] - last_renew:.2f} s after the last renew (bound {TAKEOVER_BOUND:.1f} s)"
    )
    # It took over once the lease ran out, not some lease durations later: the bound from the timers, with a
    # whole lease duration of slack for a loaded machine (the figure itself is printed above).
    assert takeover <= TAKEOVER_BOUND + LEASE_DURATION
    # The follower waited a whole lease after the last renew it could have seen: the two never acted at once.
    assert b_started["t"] - last_renew >= LEASE_DURATION
    assert b_started["t"] > killed
    assert b_started["term"] == a_started["term"] + 1


def test_a_stopped_leader_releases_and_the_follower_leads_at_once(holders: Holders) -> None:
    holders.start("a", timers=LONG)
    a_started = holders.wait_for("a", "started")
    holders.start("b", timers=LONG)
    holders.wait_until_following("b", "a")

    terminated = holders.signal("a", signal.SIGTERM)
    assert holders.exit_code("a") == 0
    a_stopped = holders.wait_for("a", "stopped")
    b_started = holders.wait_for("b", "started", timeout=2 * LONG.lease_duration)

    takeover = b_started["t"] - terminated
    print(f"\nSIGTERMed leader: released, follower led {takeover:.2f} s after the SIGTERM")
    # Without the release the follower would wait the lease out: a lease duration (15 s) after a's last renew,
    # which came at most a retry period (0.5 s) before the SIGTERM. With it, the follower takes the lease at
    # its next retry (1.1 s at most): half the lease duration is room enough for any load, and tells the two.
    assert takeover < LONG.lease_duration / 2, "the follower waited the lease out: a did not release it"
    assert a_stopped["t"] <= b_started["t"]
    assert b_started["term"] == a_started["term"] + 1


def _usurp(leases: client.CoordinationV1Api, namespace: str) -> float:
    """Take the lease from its holder, retrying when it renewed in between: the holder's last renew (its
    renewTime, as the usurper replaced it)."""
    for _ in range(20):
        lease = leases.read_namespaced_lease(LEASE, namespace)
        last_renew: float = lease.spec.renew_time.timestamp()
        lease.spec.holder_identity = "usurper"
        lease.spec.renew_time = datetime.now(UTC)
        lease.spec.lease_transitions += 1
        try:
            leases.replace_namespaced_lease(LEASE, namespace, lease)
        except client.ApiException as error:
            if error.status == 409:
                continue
            raise
        return last_renew
    raise AssertionError("the lease could not be taken over")


def test_a_deposed_leader_stops_within_the_renew_deadline(
    holders: Holders, api_client: client.ApiClient, namespace: str
) -> None:
    holders.start("c", timers=LONG)
    holders.wait_for("c", "started")

    last_renew = _usurp(client.CoordinationV1Api(api_client), namespace)
    deposed = time.time()
    c_stopped = holders.wait_for("c", "stopped", timeout=2 * LONG.lease_duration)

    print(f"\ndeposed leader: stopped {c_stopped['t'] - deposed:.2f} s after the takeover")
    # It sees the other holder at its next renew (a retry period on) and stops then, well within its renew
    # deadline; one that went on until the deadline (10 s after its last renew) would fail here.
    assert c_stopped["t"] - last_renew < LONG.renew_deadline / 2, "it led on until its renew deadline"
    assert "c: lease taken over by usurper" in holders.output("c"), "it stopped for the takeover it saw"
    assert holders.exit_code("c") == 1
    assert lease_spec(api_client, namespace).holder_identity == "usurper"


def test_a_leader_that_cannot_renew_stops_at_the_renew_deadline(
    holders: Holders, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="lease-holder"),
            rules=[
                client.V1PolicyRule(
                    api_groups=["coordination.k8s.io"],
                    resources=["leases"],
                    verbs=["get", "create", "update"],
                )
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="lease-holder"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="lease-holder"
            ),
            subjects=[
                client.RbacV1Subject(api_group="rbac.authorization.k8s.io", kind="User", name="holder-d")
            ],
        ),
    )
    holders.start("d", kubeconfig=control_plane.kubeconfig_for("holder-d"), timers=WIDE)
    holders.wait_for("d", "started")

    rbac.delete_namespaced_role_binding("lease-holder", namespace)
    revoked = time.time()
    d_stopped = holders.wait_for("d", "stopped", timeout=2 * WIDE.lease_duration)

    # It could not release: the lease still names it, and simply expires for the followers. Its renewTime is
    # d's last successful renew (stamped as that renew began).
    spec = lease_spec(api_client, namespace)
    assert spec.holder_identity == "d"
    since_renew = d_stopped["t"] - spec.renew_time.timestamp()
    print(
        f"\nleader without write access: stopped {d_stopped['t'] - revoked:.2f} s after losing it, "
        f"{since_renew:.2f} s after its last renew (renew deadline {WIDE.renew_deadline} s)"
    )
    # It kept leading through the refused renews until its renew deadline (6 s; a loaded machine only delays
    # that: half of it is room for a renew the server applied but answered too late for d to count), and
    # stopped before the lease ran out for the followers (4 s later: room for a loaded machine's scheduling).
    # One that gave up at the first refused renew stops a retry period (0.5 s) after its last renew.
    assert since_renew > WIDE.renew_deadline / 2, "it gave up before its renew deadline"
    assert since_renew < WIDE.lease_duration, "it led on past the moment a follower could take over"
    assert holders.exit_code("d") == 1


def test_terms_never_go_back_when_the_lease_is_deleted_and_re_created(
    api_client: client.ApiClient, namespace: str
) -> None:
    """The HA records refuse a term lower than one they saw: a re-created Lease must not start again at 0."""

    def lead_once(identity: str) -> Epoch:
        lock = KubernetesLeaseLock(
            api_client,
            namespace=namespace,
            name=LEASE,
            identity=identity,
            request_timeout=2.0,
            keep_term_floor=True,
        )
        started: list[Epoch] = []
        stop = threading.Event()

        def leading(epoch: Epoch) -> None:
            started.append(epoch)
            stop.set()  # and release

        config = LeaderElectionConfig(
            identity=identity,
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
        )
        LeaderElector(config, lock, on_started_leading=leading).run(stop)
        return started[0]

    terms = [lead_once("a").term, lead_once("b").term]
    client.CoordinationV1Api(api_client).delete_namespaced_lease(LEASE, namespace)
    terms.append(lead_once("c").term)
    assert terms == [0, 1, 2]
    floor = client.CoreV1Api(api_client).read_namespaced_config_map(f"{LEASE}-term", namespace)
    assert floor.data == {"term": "2"}
    assert floor.metadata.labels == {"app.kubernetes.io/managed-by": "ftspark"}, "the operator's own"

    # A floor beyond any term a Lease can hold (leaseTransitions is an int32) would keep every replica from
    # leading again: it reads as no floor, and the next leader writes its own.
    core = client.CoreV1Api(api_client)
    core.patch_namespaced_config_map(f"{LEASE}-term", namespace, {"data": {"term": str(2**62)}})
    client.CoordinationV1Api(api_client).delete_namespaced_lease(LEASE, namespace)
    assert lead_once("d").term == 0
    assert core.read_namespaced_config_map(f"{LEASE}-term", namespace).data == {"term": "0"}
