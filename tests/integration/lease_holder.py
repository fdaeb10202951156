"""A contender for a Lease on a real API server, for the leader-election tests.

Appends {"event": "started"|"stopped", "identity", "t", "term"} JSON lines to --log, and
{"event": "new_leader", "leader"} ones so a test knows this contender has seen the leader. SIGTERM stops it
gracefully (release, exit 0); losing the lease makes it exit 1, as the operator will.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from pathlib import Path

from kubernetes import client, config

from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.domain.fencing import Epoch
from ftspark.leader.elector import LeaderElectionConfig, LeaderElector


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--lease", default="ftspark-operator")
    parser.add_argument("--lease-duration", type=int, default=3)
    parser.add_argument("--renew-deadline", type=float, default=2.0)
    parser.add_argument("--retry-period", type=float, default=0.5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    settings = LeaderElectionConfig(
        identity=args.identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    configuration = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    # urllib3 would retry 3 times by default, multiplying the request timeout the renew deadline relies on.
    configuration.retries = 0
    lock = KubernetesLeaseLock(
        client.ApiClient(configuration),
        namespace=args.namespace,
        name=args.lease,
        identity=args.identity,
        request_timeout=args.retry_period,
    )

    def record(event: str, term: int | None = None, leader: str | None = None) -> None:
        line = {"event": event, "identity": args.identity, "t": time.time(), "term": term, "leader": leader}
        with args.log.open("a") as log:
            log.write(json.dumps(line) + "\n")

    def started(epoch: Epoch) -> None:
        record("started", epoch.term)

    def stopped() -> None:
        record("stopped")

    def new_leader(identity: str) -> None:
        record("new_leader", leader=identity)

    elector = LeaderElector(
        settings, lock, on_started_leading=started, on_stopped_leading=stopped, on_new_leader=new_leader
    )
    stop = threading.Event()
    # The elector runs in a thread and the main thread takes SIGTERM synchronously: an Event set from a
    # signal handler could deadlock on the lock the interrupted main thread holds.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    runner = threading.Thread(target=elector.run, args=(stop,), name="elector")
    runner.start()
    while runner.is_alive():
        if signal.sigtimedwait({signal.SIGTERM}, 0.1) is not None:
            stop.set()
    runner.join()
    return 0 if stop.is_set() else 1


if __name__ == "__main__":
    raise SystemExit(main())
