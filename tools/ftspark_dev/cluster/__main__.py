"""`make dev-cluster`: a local control plane in the foreground for a person, until Ctrl-C."""

from __future__ import annotations

import argparse
import shutil
import signal
import threading
from pathlib import Path

from ftspark_dev.cluster.controlplane import ControlPlane
from ftspark_dev.cluster.processes import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--dir", type=Path, default=REPO_ROOT / ".dev-cluster", help="state, logs and kubeconfig"
    )
    parser.add_argument("--no-controllers", action="store_true", help="only etcd and kube-apiserver")
    args = parser.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    workdir: Path = args.dir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)  # a previous run's state: certificates and ports are new
    plane = ControlPlane(
        workdir=workdir, service_account_admission=not args.no_controllers, keep_workdir=True
    )
    print(f"starting etcd and kube-apiserver in {workdir} ...", flush=True)
    try:
        plane.start()
        if not args.no_controllers:
            plane.start_controllers()
        kubeconfig = plane.kubeconfig
        kubectl = plane.bin_dir / "kubectl"
        print(
            f"\nA Kubernetes control plane is up at {plane.server}.\n"
            f"  export KUBECONFIG={kubeconfig}\n"
            f"  export PATH={plane.bin_dir}:$PATH   # kubectl {kubectl}\n"
            "  kubectl get --raw /readyz; kubectl apply -f crds/\n"
            f"Logs: {plane.log_dir}. Ctrl-C stops everything.",
            flush=True,
        )
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping ...", flush=True)
        plane.stop()


if __name__ == "__main__":
    main()
