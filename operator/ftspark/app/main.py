"""`python -m ftspark.app.main`: one operator replica. It campaigns for the Lease; only the leader watches and
reconciles. A leader that misses its renew deadline exits at once (non-zero) and comes back as a follower;
SIGTERM stops reconciling, releases the Lease (hand-over within one retry period) and exits 0."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, NoReturn

import boto3
from botocore.config import Config
from kubernetes import client

from ftspark.adapters.ha import ha_stores
from ftspark.adapters.k8s import kube_configuration
from ftspark.adapters.k8s.cluster import KubeDrivers, KubeEvents, KubeJobs
from ftspark.adapters.k8s.counted import CountedApiClient
from ftspark.adapters.k8s.driver_logs import KubeDriverLogs
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.adapters.k8s.record_key import record_seal
from ftspark.adapters.k8s.schedules import KubeSchedules
from ftspark.adapters.s3.inspector import S3CheckpointInspector
from ftspark.adapters.s3.stores import S3BlobStore, S3Records, UnfencedStoreError
from ftspark.app.config import OperatorConfig, parse
from ftspark.app.controller import Controller
from ftspark.app.probes import serve
from ftspark.domain.fencing import Epoch, NotLeadingError
from ftspark.leader.elector import LeaderElector
from ftspark.metrics import FAILOVER_SECONDS, LEADER, LEASE_TRANSITIONS
from ftspark.protocol import record_key_name, term_floor_name
from ftspark.reconcile.nodes import NodeWatch
from ftspark.reconcile.reconciler import Reconciler
from ftspark.reconcile.schedules import ScheduleReconciler
from ftspark.reconcile.settings import DriverSettings, JobDefaults, JobPolicy, Ports, ResultLimits

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("ftspark")


def api_client(cfg: OperatorConfig, *, retries: int | None = None) -> client.ApiClient:
    """retries=0 for the Lease: urllib3's retries would stretch one renew past the renew deadline."""
    configuration = kube_configuration(cfg.kubeconfig)
    if retries is not None:
        configuration.retries = retries
    # A connection for every reconcile worker, the checkpoint poller and the result sweeper: the client's
    # default (5 per CPU) would close and re-open TLS connections under a burst.
    configuration.connection_pool_maxsize = cfg.workers + 2
    api = CountedApiClient(configuration)
    # Names the replica in the API server's audit log: who wrote what, when (the soak checks the writers).
    api.user_agent = f"ftspark-operator ({cfg.identity})"
    return api


def s3_client(cfg: OperatorConfig) -> S3Client:
    """Bounded like the API server's calls (10 s): botocore's default of 60 s with 5 attempts would keep a
    reconcile worker on an unreachable S3 (which may hold the HA records) past a graceful hand-over."""
    return boto3.client(
        "s3",
        endpoint_url=cfg.s3_endpoint,
        region_name=cfg.s3_region,
        config=Config(connect_timeout=10, read_timeout=10, retries={"max_attempts": 3, "mode": "standard"}),
    )


def lease_health(elector: LeaderElector, cfg: OperatorConfig) -> tuple[bool, str]:
    since = elector.seconds_since_renew()
    if since is None:
        return True, "following"
    if since > cfg.renew_deadline:
        return False, f"leading, but the Lease was last renewed {since:.1f} s ago"
    return True, f"leading, renewed {since:.1f} s ago"


def lease_ready(elector: LeaderElector, cfg: OperatorConfig) -> bool:
    """Ready: the API server answered the elector within a lease duration, so this replica leads or could
    take over. Not ready while it cannot reach the API server (a standby that could not lead either)."""
    since = elector.seconds_since_contact()
    return since is not None and since <= cfg.lease_duration


class OperatorReplica:
    """One replica: its clients and stores, and the elector whose callbacks are its methods. It reconciles
    only while it leads; a replica that leads once never follows again (it exits instead)."""

    def __init__(self, cfg: OperatorConfig) -> None:
        self.cfg = cfg
        self.api = api_client(cfg)
        self.s3 = s3_client(cfg)
        self.ha = cfg.ha()
        records = None
        if self.ha.kind == "s3":
            records = S3Records(self.s3, self.ha.s3_root, namespaces=cfg.watch_namespaces)
            records.refuse_unless_fenced()  # before anything is written anywhere
        # Read (or made) before anything else: without it no job graph or result can be trusted.
        self.seal = record_seal(self.api, cfg.namespace, record_key_name(cfg.lease_name))
        self.stores = ha_stores(
            self.ha,
            self.api,
            self.s3,
            self.seal,
            results_namespace=cfg.namespace,
            namespaces=cfg.watch_namespaces,
        )
        # S3 has no watch: the controller polls the checkpoint records' versions instead.
        self.checkpoint_versions = records.checkpoint_versions if records else None
        self.stop = threading.Event()  # set by SIGTERM/SIGINT: stop reconciling, release the Lease
        self.controller: Controller | None = None
        self.leader_seen: str | None = None
        lock = KubernetesLeaseLock(
            api_client(cfg, retries=0),
            namespace=cfg.namespace,
            name=cfg.lease_name,
            identity=cfg.identity,
            request_timeout=max(1.0, (cfg.lease_duration - cfg.renew_deadline) / 2),
            keep_term_floor=True,
        )
        self.elector = LeaderElector(
            cfg.election(),
            lock,
            on_started_leading=self.started_leading,
            on_stopped_leading=self.stopped_leading,
            on_new_leader=self.new_leader,
        )

    def run(self) -> int:
        """Campaign until stopped: 0 after SIGTERM/SIGINT, 1 if the elector gave up on its own."""
        cfg, elector = self.cfg, self.elector
        if cfg.probe_port:
            serve(
                cfg.probe_port,
                healthy=lambda: lease_health(elector, cfg),
                ready=lambda: lease_ready(elector, cfg),
            )
        watchdog = threading.Thread(
            target=elector.watch_renewals,
            args=(self.stop, lambda _: self.lose_leadership_fast()),
            name="renew-watchdog",
            daemon=True,
        )
        watchdog.start()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop.set())
        elector.run(self.stop)
        return 0 if self.stop.is_set() else 1

    def epoch(self) -> Epoch:
        """The fencing term of every write the reconciler makes: refused once leadership is gone."""
        epoch = self.elector.epoch
        if epoch is None:
            raise NotLeadingError(f"{self.cfg.identity} is not leading")
        return epoch

    def started_leading(self, epoch: Epoch) -> None:
        log.info("%s: leading as %s; starting to reconcile", self.cfg.identity, epoch)
        LEADER.set(1)
        if self.elector.takeover_gap is not None:
            FAILOVER_SECONDS.set(self.elector.takeover_gap)
        nodes = NodeWatch(self.cfg.node_silence_seconds)
        ports = Ports(
            jobs=KubeJobs(self.api),
            drivers=KubeDrivers(self.api, self.seal),
            events=KubeEvents(self.api),
            stores=self.stores,
            inspector=S3CheckpointInspector(self.s3),
            storage=S3BlobStore(self.s3),
            logs=KubeDriverLogs(self.api),
            nodes=nodes,
        )
        reconciler = Reconciler(
            ports,
            self.epoch,
            DriverSettings(f"{self.cfg.namespace}/{term_floor_name(self.cfg.lease_name)}", self.ha),
            policy=JobPolicy(self.cfg.allow, self.cfg.storage_prefixes, own_namespace=self.cfg.namespace),
            limits=ResultLimits(self.cfg.max_result_retention_seconds, self.cfg.max_results_per_namespace),
            defaults=JobDefaults(
                self.cfg.default_ttl_seconds_after_finished,
                self.cfg.driver_disruption_budget,
                self.cfg.ui_ingress,
            ),
        )
        self.controller = Controller(
            reconciler,
            api_configuration=self.api.configuration,
            workers=self.cfg.workers,
            namespaces=self.cfg.watch_namespaces,
            on_fatal=self.lose_leadership_fast,
            result_sweep_seconds=self.cfg.result_sweep_seconds,
            checkpoint_versions=self.checkpoint_versions,
            checkpoint_refreshes_per_second=self.cfg.checkpoint_refreshes_per_second,
            nodes=nodes,
            watch_drains=self.cfg.driver_disruption_budget,
            schedules=ScheduleReconciler(KubeSchedules(self.api), ports.events, self.epoch),
        )
        self.controller.start()

    def stopped_leading(self) -> None:
        LEADER.set(0)
        if not self.stop.is_set():
            self.lose_leadership_fast()
        if self.controller is not None and not self.controller.stop():
            # A reconcile is still running: releasing the Lease now would let the next leader act beside
            # it. Exit without releasing; the Lease expires as if this replica had been killed.
            log.error(
                "%s: reconcile workers still busy at shutdown; not releasing the Lease", self.cfg.identity
            )
            self.lose_leadership_fast()

    def new_leader(self, identity: str) -> None:
        if self.leader_seen is not None:  # the first leader this replica sees is no transition it saw happen
            LEASE_TRANSITIONS.inc()
        self.leader_seen = identity
        log.info("leader is now %s", identity)

    def lose_leadership_fast(self) -> NoReturn:
        log.error("%s: leadership lost; exiting so that nothing acts without the Lease", self.cfg.identity)
        logging.shutdown()
        os._exit(1)


def run(cfg: OperatorConfig) -> int:
    try:
        replica = OperatorReplica(cfg)
    except UnfencedStoreError as error:
        # The last line of the log is the container's termination message (the chart's
        # FallbackToLogsOnError): `kubectl describe pod` says why the replica will not start.
        log.error("refusing to start: %s", error)
        return 2
    return replica.run()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.WARNING)
    sys.exit(run(parse()))


if __name__ == "__main__":
    main()
