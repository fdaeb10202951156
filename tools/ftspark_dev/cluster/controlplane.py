"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and, on demand,
kube-scheduler and kube-controller-manager, all built from source by tools/kubebin.

There is no kubelet here: pods run on process-backed nodes (ftspark_dev.nodes) or on real nodes
(ftspark_dev.realnodes), which need the API server on an address pods can reach (`address`) and a service
range their kube-proxy serves (`service_cidr`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ftspark_dev.cluster import pki
from ftspark_dev.cluster.processes import REPO_ROOT, ManagedProcess, built_by, free_port, wait_until_healthy

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
_START_TIMEOUT = 120.0


def binaries_dir() -> Path:
    """The directory holding etcd, kube-apiserver, ... — built on first use (prints progress)."""
    override = os.environ.get("FTSPARK_KUBEBIN_DIR")
    if override:
        return Path(override)
    return built_by(REPO_ROOT / "tools" / "kubebin" / "build.sh")


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, credentials: pki.KeyPair, user: str) -> Path:
    """The certificates go in files beside it, named in it: with them inline, the Python client copies them
    to temporary files it deletes only at a clean exit, so every SIGKILLed process (a killed operator replica,
    a driver) would leave a private key in /tmp."""
    files = {"ca": ca_pem, "crt": credentials.cert_pem, "key": credentials.key_pem}
    paths = {kind: path.with_name(f"{path.name}.{kind}.pem") for kind in files}
    for kind, data in files.items():
        paths[kind].write_bytes(data)
        paths[kind].chmod(0o600)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(paths["ca"])}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(paths["crt"]), "client-key": str(paths["key"])},
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


_WORKDIR_PREFIX = "ftspark-cp-"
_OWNER_FILE = "owner.pid"


def _sweep_abandoned_workdirs() -> None:
    """Remove temporary control planes whose owning process died without cleaning up (SIGKILL)."""
    for candidate in Path(tempfile.gettempdir()).glob(f"{_WORKDIR_PREFIX}*"):
        owner = candidate / _OWNER_FILE
        try:
            os.kill(int(owner.read_text()), 0)
        except (FileNotFoundError, ValueError):
            continue  # not one of ours, or still being created
        except ProcessLookupError:
            shutil.rmtree(candidate, ignore_errors=True)


def _new_workdir() -> Path:
    _sweep_abandoned_workdirs()
    workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
    (workdir / _OWNER_FILE).write_text(str(os.getpid()))
    return workdir


@dataclass
class ControlPlane:
    """Start with start(); add the scheduler and controller-manager with start_controllers()."""

    workdir: Path = field(default_factory=_new_workdir)
    bin_dir: Path = field(default_factory=binaries_dir)
    # The ServiceAccount admission plugin rejects pods until the controller-manager has created each
    # namespace's default ServiceAccount, so it is on only for a full cluster (as envtest does).
    service_account_admission: bool = False
    keep_workdir: bool = False
    # Where the API server listens and what it advertises: loopback for process-backed nodes; an address of
    # the real-node network (pods cannot reach the host's loopback) for real nodes.
    address: str = "127.0.0.1"
    service_cidr: str = SERVICE_CLUSTER_IP_RANGE
    # An audit.k8s.io/v1 Policy: the API server logs the requests it selects to audit_log (audit_events()).
    audit_policy: dict[str, Any] | None = None
    # How long a node may stay silent before the node controller marks it and its pods not Ready: short, so
    # that a killed node's pods are noticed in seconds (Kubernetes' default is 50 s).
    node_grace_seconds: int = 20

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki_dir = self.workdir / "pki"
        self.log_dir = self.workdir / "logs"
        self.pki_dir.mkdir(exist_ok=True)
        self.audit_log = self.workdir / "audit.log"
        self._ca = pki.CertificateAuthority()
        self.ca_path = self.pki_dir / "ca.crt"
        self.ca_path.write_bytes(self._ca.cert_pem)
        self.apiserver_port = free_port(self.address)
        self.server = f"https://{self.address}:{self.apiserver_port}"
        self.kubeconfig = self.kubeconfig_for("ftspark-admin", groups=("system:masters",), name="admin")
        self._processes: dict[str, ManagedProcess] = {}

    # -- credentials -------------------------------------------------------------------------------------

    def kubeconfig_for(self, user: str, *, groups: tuple[str, ...] = (), name: str | None = None) -> Path:
        """A kubeconfig authenticating as user (client certificate: CN=user, O=groups)."""
        pair = self._ca.issue(user, organization=",".join(groups) or None)
        if len(groups) > 1:
            raise ValueError("one group per client certificate is enough for these tests")
        return write_kubeconfig(
            self.workdir / f"{name or user}.kubeconfig", self.server, self._ca.cert_pem, pair, user
        )

    def kubeconfig_for_service_account(self, namespace: str, name: str, *, pod: str = "") -> Path:
        """A kubeconfig authenticating as the ServiceAccount, with a token the API server issues for it: its
        real identity, groups included (a client certificate would carry only the name). pod: the token is
        bound to that pod, as the kubelet's are (the pod's name and uid then travel with every request)."""
        bound = ["--bound-object-kind=Pod", f"--bound-object-name={pod}"] if pod else []
        token = self.kubectl("-n", namespace, "create", "token", name, *bound).stdout.strip()
        user = f"{namespace}-{name}{f'-{pod}' if pod else ''}"
        document = yaml.safe_load(self.kubeconfig.read_text())
        document["users"] = [{"name": user, "user": {"token": token}}]
        document["contexts"][0]["context"]["user"] = user
        path = self.workdir / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path

    def _admin_ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_path))
        admin = self._ca.issue("ftspark-health", organization="system:masters")
        cert, key = pki.write(self.pki_dir, "health-client", admin)
        context.load_cert_chain(cert, key)
        return context

    # -- processes ---------------------------------------------------------------------------------------

    def _binary(self, name: str) -> str:
        path = self.bin_dir / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `make cluster-bin`")
        return str(path)

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        process = ManagedProcess(name, argv, self.log_dir)
        self._processes[name] = process
        process.start()
        return process

    def start(self) -> ControlPlane:
        try:
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_etcd(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                self._binary("etcd"),
                "--name=ftspark",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=ftspark={peer_url}",
                "--unsafe-no-fsync=true",  # tests only: durability is not what they measure
                "--quota-backend-bytes=4294967296",
                "--auto-compaction-retention=1",
                "--log-level=warn",
            ],
        )
        wait_until_healthy(
            etcd, f"{self.etcd_url}/health", timeout=_START_TIMEOUT, healthy=lambda b: b'"true"' in b
        )

    def _start_apiserver(self) -> None:
        # The `kubernetes` Service's ClusterIP is the service range's first address.
        service_ip = str(ipaddress.ip_network(self.service_cidr).network_address + 1)
        serving = self._ca.issue(
            "kube-apiserver",
            server_names=(
                *dict.fromkeys((self.address, "127.0.0.1")),
                "localhost",
                service_ip,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        serving_cert, serving_key = pki.write(self.pki_dir, "apiserver", serving)
        self.service_account_key = self.pki_dir / "sa.key"
        sa_public, _ = pki.write(self.pki_dir, "sa", pki.service_account_signing_key())
        sa_public_path = self.pki_dir / "sa.pub"
        sa_public.rename(sa_public_path)
        kubelet_client_cert, kubelet_client_key = pki.write(
            self.pki_dir,
            "apiserver-kubelet-client",
            self._ca.issue("kube-apiserver-kubelet-client", organization="system:masters"),
        )
        argv = [
            self._binary("kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={serving_cert}",
            f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={self.ca_path}",
            "--authorization-mode=Node,RBAC",
            f"--service-cluster-ip-range={self.service_cidr}",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={sa_public_path}",
            f"--service-account-signing-key-file={self.service_account_key}",
            # logs, exec and port-forward on real nodes: the API server calls the kubelets as this client.
            f"--kubelet-client-certificate={kubelet_client_cert}",
            f"--kubelet-client-key={kubelet_client_key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
        ]
        if not self.service_account_admission:
            argv.append("--disable-admission-plugins=ServiceAccount")
        if self.audit_policy is not None:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(self.audit_policy))
            argv += [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}"]
        apiserver = self._spawn("kube-apiserver", argv)
        wait_until_healthy(
            apiserver, f"{self.server}/readyz", timeout=_START_TIMEOUT, ssl_context=self._admin_ssl_context()
        )

    def start_controllers(self) -> None:
        """kube-scheduler and kube-controller-manager (garbage collector, namespaces, service accounts…)."""
        if "kube-scheduler" not in self._processes:
            kubeconfig = self.kubeconfig_for("system:kube-scheduler")
            scheduler = self._spawn(
                "kube-scheduler",
                [
                    self._binary("kube-scheduler"),
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={free_port()}",
                ],
            )
            self._wait_running(scheduler)
        if "kube-controller-manager" not in self._processes:
            kubeconfig = self.kubeconfig_for("system:kube-controller-manager")
            manager = self._spawn(
                "kube-controller-manager",
                [
                    self._binary("kube-controller-manager"),
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    f"--root-ca-file={self.ca_path}",
                    f"--service-account-private-key-file={self.service_account_key}",
                    "--use-service-account-credentials=true",
                    "--controllers=*",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={free_port()}",
                    f"--service-cluster-ip-range={self.service_cidr}",
                    f"--node-monitor-grace-period={self.node_grace_seconds}s",
                    "--node-monitor-period=2s",
                    # The PersistentVolume binder retries a claim whose volume its cache has not seen yet
                    # (made a moment before) at this period, 15 s by default: 2 s here.
                    "--pvclaimbinder-sync-period=2s",
                ],
            )
            self._wait_running(manager)

    def _wait_running(self, process: ManagedProcess, seconds: float = 3.0) -> None:
        # Scheduler and controller-manager serve health only to authorized clients; readiness is proven
        # by the tests that use them. Here: fail fast when one exits at start-up (bad flag, bad cert).
        try:
            subprocess.run(["sleep", str(seconds)], check=True)
        finally:
            if not process.running():
                raise RuntimeError(f"{process.name} exited during start-up:\n{process.log_tail()}")

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log so far (one JSON event a line; empty without an audit_policy)."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def process(self, name: str) -> ManagedProcess:
        return self._processes[name]

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Fault injection: kube-apiserver crashes (SIGKILL), stays down, and comes back on the same port."""
        apiserver = self._processes["kube-apiserver"]
        apiserver.kill()
        time.sleep(down_seconds)
        apiserver.start()
        wait_until_healthy(
            apiserver, f"{self.server}/readyz", timeout=_START_TIMEOUT, ssl_context=self._admin_ssl_context()
        )

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self._binary("kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            check=False,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def stop(self) -> None:
        for process in reversed(list(self._processes.values())):
            process.stop()
        self._processes.clear()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
