"""`python -m ftspark.app.main`: one operator replica. It campaigns for the Lease; only the leader watches and
reconciles. A leader that misses its renew deadline exits at once (non-zero) and comes back as a follower;
SIGTERM stops reconciling, releases the Lease (hand-over within one retry period) and exits 0."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

import boto3
from kubernetes import client, config

from ftspark.adapters.k8s.cluster import KubeDrivers, KubeEvents, KubeJobs
from ftspark.adapters.k8s.configmap_stores import configmap_stores
from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.adapters.s3.inspector import S3CheckpointInspector
from ftspark.adapters.s3.stores import S3BlobStore
from ftspark.app.config import OperatorConfig, parse
from ftspark.app.controller import Controller
from ftspark.app.probes import serve
from ftspark.domain.fencing import Epoch
from ftspark.leader.elector import LeaderElector
from ftspark.metrics import FAILOVER_SECONDS, LEADER, LEASE_TRANSITIONS
from ftspark.reconcile.reconciler import Reconciler

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("ftspark")


class NotLeadingError(RuntimeError):
    """A write was about to be made after leadership was lost: refused before it reaches a store."""


def api_client(cfg: OperatorConfig, *, retries: int | None = None) -> client.ApiClient:
    """retries=0 for the Lease: urllib3's retries would stretch one renew past the renew deadline."""
    configuration = client.Configuration()
    if cfg.kubeconfig:
        config.load_kube_config(config_file=cfg.kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    if retries is not None:
        configuration.retries = retries
    return client.ApiClient(configuration)


def s3_client(cfg: OperatorConfig) -> S3Client:
    return boto3.client("s3", endpoint_url=cfg.s3_endpoint, region_name=cfg.s3_region)


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


def run(cfg: OperatorConfig) -> int:
    api = api_client(cfg)
    s3 = s3_client(cfg)
    stores = configmap_stores(
        api, S3BlobStore(s3), results_namespace=cfg.namespace, namespaces=cfg.watch_namespaces
    )
    lock = KubernetesLeaseLock(
        api_client(cfg, retries=0),
        namespace=cfg.namespace,
        name=cfg.lease_name,
        identity=cfg.identity,
        request_timeout=max(1.0, (cfg.lease_duration - cfg.renew_deadline) / 2),
    )
    stop = threading.Event()
    controller: Controller | None = None
    elector: LeaderElector

    def current_epoch() -> Epoch:
        epoch = elector.epoch
        if epoch is None:
            raise NotLeadingError(f"{cfg.identity} is not leading")
        return epoch

    def lose_leadership_fast() -> None:
        log.error("%s: leadership lost; exiting so that nothing acts without the Lease", cfg.identity)
        logging.shutdown()
        os._exit(1)

    def started_leading(epoch: Epoch) -> None:
        nonlocal controller
        log.info("%s: leading as %s; starting to reconcile", cfg.identity, epoch)
        LEADER.set(1)
        if elector.takeover_gap is not None:
            FAILOVER_SECONDS.set(elector.takeover_gap)
        reconciler = Reconciler(
            jobs=KubeJobs(api),
            drivers=KubeDrivers(api),
            events=KubeEvents(api),
            graphs=stores.job_graphs,
            checkpoints=stores.checkpoints,
            results=stores.results,
            inspector=S3CheckpointInspector(s3),
            epoch=current_epoch,
            allowed=cfg.allow,
        )
        controller = Controller(
            reconciler,
            api_configuration=api.configuration,
            workers=cfg.workers,
            namespaces=cfg.watch_namespaces,
            on_fatal=lose_leadership_fast,
            result_sweep_seconds=cfg.result_sweep_seconds,
        )
        controller.start()

    def stopped_leading() -> None:
        LEADER.set(0)
        if not stop.is_set():
            lose_leadership_fast()
        if controller is not None and not controller.stop():
            # A reconcile is still running: releasing the Lease now would let the next leader act beside
            # it. Exit without releasing; the Lease expires as if this replica had been killed.
            log.error("%s: reconcile workers still busy at shutdown; not releasing the Lease", cfg.identity)
            lose_leadership_fast()

    leaders_seen: list[str] = []

    def new_leader(identity: str) -> None:
        if leaders_seen:  # the first leader this replica sees is no transition it saw happen
            LEASE_TRANSITIONS.inc()
        leaders_seen[:] = [identity]
        log.info("leader is now %s", identity)

    elector = LeaderElector(
        cfg.election(),
        lock,
        on_started_leading=started_leading,
        on_stopped_leading=stopped_leading,
        on_new_leader=new_leader,
    )
    if cfg.probe_port:
        serve(
            cfg.probe_port,
            healthy=lambda: lease_health(elector, cfg),
            ready=lambda: lease_ready(elector, cfg),
        )

    def renew_watchdog() -> None:
        # The elector gives up at its renew deadline, but only between calls: a call hung in the network (a
        # partition swallowing packets) would keep it acting past the deadline. Nothing is allowed to.
        while not stop.wait(0.2):
            since = elector.seconds_since_renew()
            if since is not None and since > cfg.renew_deadline:
                lose_leadership_fast()

    threading.Thread(target=renew_watchdog, name="renew-watchdog", daemon=True).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    elector.run(stop)
    return 0 if stop.is_set() else 1


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.WARNING)
    sys.exit(run(parse()))


if __name__ == "__main__":
    main()
