"""Operator configuration: flags with environment defaults, validated in one place."""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ftspark.domain.models import S3_URI, YEAR_SECONDS, UiIngressSpec
from ftspark.domain.policy import Allowance
from ftspark.leader.elector import LeaderElectionConfig
from ftspark.protocol import HaStoreConfig, HaStoreKind
from ftspark.reconcile.nodes import NODE_SILENCE_SECONDS
from ftspark.reconcile.pacing import CHECKPOINT_REFRESHES_PER_SECOND
from ftspark.reconcile.settings import MAX_RESULT_RETENTION_SECONDS, MAX_RESULTS_PER_NAMESPACE


class OperatorConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    identity: str = Field(
        min_length=1, description="This replica's Lease holder identity (unique per replica)."
    )
    namespace: str = Field(min_length=1, description="The operator's namespace: its Lease and job results.")
    watch_namespaces: tuple[str, ...] = Field(default=(), description="Namespaces to manage; empty: all.")
    lease_name: str = "ftspark-operator"
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # A pass spends most of its time waiting on the API server (a new job: 11 calls in a row), so the
    # workers' number, not the operator's CPU, bounds a burst: 1,000 new jobs took 40 s with 4, 28 s with 16,
    # 33 s with 32 (the API server, on the same 2 cores, answers slower).
    workers: int = Field(default=16, ge=1, le=64, description="Jobs reconciled in parallel.")
    kubeconfig: str | None = Field(default=None, description="Outside a cluster: the kubeconfig to use.")
    s3_endpoint: str | None = Field(default=None, description="S3 endpoint URL (unset: AWS).")
    s3_region: str = "us-east-1"
    ha_store: HaStoreKind = Field(
        default="configmaps", description="Where HA records live: ConfigMaps (etcd) or S3 objects."
    )
    ha_s3_root: str = Field(
        default="", description="With ha_store s3: s3://<bucket>/<prefix>, this installation's alone."
    )
    probe_port: int = Field(
        default=8080, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz; 0 turns it off."
    )
    result_sweep_seconds: float = Field(
        default=300.0, gt=0, description="How often results past their retention (resultStore.ttlSeconds) go."
    )
    checkpoint_refreshes_per_second: float = Field(
        default=CHECKPOINT_REFRESHES_PER_SECOND,
        gt=0,
        description="Status refreshes that checkpoint reports cause, all jobs together: a job's status shows "
        "its newest checkpoint within max(5 s, checkpointing jobs / this) seconds.",
    )
    max_result_retention_seconds: int = Field(
        default=MAX_RESULT_RETENTION_SECONDS,
        gt=0,
        description="No result is kept longer than this after its job finished, whatever "
        "resultStore.ttlSeconds says (0 included); one whose job resource still exists is kept anyway.",
    )
    max_results_per_namespace: int = Field(
        default=MAX_RESULTS_PER_NAMESPACE,
        gt=0,
        description="Clean results kept per namespace: the oldest beyond it go at the next sweep (except "
        "those whose job resource still exists).",
    )
    default_ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=YEAR_SECONDS,
        description="A finished job whose spec sets no ttlSecondsAfterFinished is deleted this long after it "
        "ended; unset: it stays until deleted.",
    )
    driver_disruption_budget: bool = Field(
        default=True,
        description="Watch nodes for drains (a ClusterRole to list and watch nodes) and give each driver pod "
        "a PodDisruptionBudget unless its spec says not to: a drain then waits while the operator moves the "
        "driver off the node with a final checkpoint.",
    )
    node_silence_seconds: float = Field(
        default=NODE_SILENCE_SECONDS,
        ge=0,
        description="A driver whose node has not renewed its Lease (kube-node-lease) for this long gets a "
        "standby, promoted if the node controller finds the node lost (a Role to list and watch Leases in "
        "kube-node-lease); 0: node Leases are not watched.",
    )
    ui_ingress: UiIngressSpec = Field(
        default_factory=UiIngressSpec,
        description="The Ingress a job's spec.ui gets where its spec leaves a field unset (--ui-ingress, "
        "--ui-ingress-class, --ui-ingress-host, --ui-ingress-tls-secret).",
    )
    allow: frozenset[Allowance] = Field(
        default=frozenset(), description="Job policy allowances granted in every namespace (--allow a,b)."
    )
    storage_prefixes: tuple[Annotated[str, Field(pattern=S3_URI)], ...] = Field(
        default=(),
        description="s3:// prefixes a job's checkpoint.storage must be under, in every namespace (a "
        "namespace's ftspark.io/storage-prefixes annotation adds its own); empty: anywhere.",
    )

    @field_validator("watch_namespaces")
    @classmethod
    def _never_kube_system(cls, namespaces: tuple[str, ...]) -> tuple[str, ...]:
        if "kube-system" in namespaces:
            raise ValueError("the operator never manages kube-system")
        return namespaces

    @model_validator(mode="after")
    def _never_its_own_namespace(self) -> OperatorConfig:
        if self.namespace in self.watch_namespaces:
            raise ValueError(
                f"--watch-namespaces: the operator never manages its own namespace {self.namespace} (its "
                "Lease, results and record key live there): run jobs in another namespace"
            )
        return self

    @model_validator(mode="after")
    def _valid_election(self) -> OperatorConfig:
        self.election()  # fails with the field named when the timings do not fit together
        self.ha()  # fails when s3 has no root, or a root is given for ConfigMaps
        return self

    def ha(self) -> HaStoreConfig:
        return HaStoreConfig(kind=self.ha_store, s3_root=self.ha_s3_root)

    def election(self) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            identity=self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name) or default


def parse(argv: list[str] | None = None) -> OperatorConfig:
    parser = argparse.ArgumentParser(prog="ftspark-operator", description="The ftspark operator.")
    parser.add_argument(
        "--identity", default=_env("POD_NAME", f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}")
    )
    parser.add_argument("--namespace", default=_env("POD_NAMESPACE", "ftspark-system"))
    parser.add_argument(
        "--watch-namespaces",
        default=_env("FTSPARK_WATCH_NAMESPACES", ""),
        help="comma-separated namespaces to manage (default: all)",
    )
    parser.add_argument("--lease-name", default=_env("FTSPARK_LEASE_NAME", "ftspark-operator"))
    parser.add_argument("--lease-duration", type=int, default=int(_env("FTSPARK_LEASE_DURATION", "15") or 15))
    parser.add_argument(
        "--renew-deadline", type=float, default=float(_env("FTSPARK_RENEW_DEADLINE", "10") or 10)
    )
    parser.add_argument("--retry-period", type=float, default=float(_env("FTSPARK_RETRY_PERIOD", "2") or 2))
    parser.add_argument("--workers", type=int, default=int(_env("FTSPARK_WORKERS", "16") or 16))
    parser.add_argument("--kubeconfig", default=_env("KUBECONFIG"))
    parser.add_argument("--s3-endpoint", default=_env("FTSPARK_S3_ENDPOINT"))
    parser.add_argument("--s3-region", default=_env("AWS_REGION", "us-east-1"))
    parser.add_argument(
        "--ha-store",
        choices=("configmaps", "s3"),
        default=_env("FTSPARK_HA_STORE", "configmaps"),
        help="where job graphs, checkpoint pointers and job results live",
    )
    parser.add_argument(
        "--ha-s3-root",
        default=_env("FTSPARK_HA_S3_ROOT", ""),
        help="with --ha-store=s3: s3://<bucket>/<prefix>, one per installation",
    )
    parser.add_argument("--probe-port", type=int, default=int(_env("FTSPARK_PROBE_PORT", "8080") or 8080))
    parser.add_argument(
        "--result-sweep-seconds",
        type=float,
        default=float(_env("FTSPARK_RESULT_SWEEP_SECONDS", "300") or 300),
    )
    parser.add_argument(
        "--checkpoint-refreshes-per-second",
        type=float,
        default=float(
            _env("FTSPARK_CHECKPOINT_REFRESHES_PER_SECOND", str(CHECKPOINT_REFRESHES_PER_SECOND)) or 0
        ),
        help="status refreshes that checkpoint reports cause, all jobs together (the rest wait their turn)",
    )
    parser.add_argument(
        "--max-result-retention-seconds",
        type=int,
        default=int(_env("FTSPARK_MAX_RESULT_RETENTION_SECONDS", str(MAX_RESULT_RETENTION_SECONDS)) or 0),
        help="the longest any job result is kept after its job finished (caps resultStore.ttlSeconds)",
    )
    parser.add_argument(
        "--max-results-per-namespace",
        type=int,
        default=int(_env("FTSPARK_MAX_RESULTS_PER_NAMESPACE", str(MAX_RESULTS_PER_NAMESPACE)) or 0),
        help="clean job results kept per namespace; the oldest beyond it are deleted by the sweeper",
    )
    parser.add_argument(
        "--default-ttl-seconds-after-finished",
        type=int,
        default=_env("FTSPARK_DEFAULT_TTL_SECONDS_AFTER_FINISHED"),
        help="delete a finished job this long after it ended unless its spec says otherwise (default: never)",
    )
    parser.add_argument(
        "--driver-disruption-budget",
        choices=("true", "false"),
        default=_env("FTSPARK_DRIVER_DISRUPTION_BUDGET", "true"),
        help="watch nodes for drains and give driver pods a PodDisruptionBudget (needs list/watch on nodes)",
    )
    parser.add_argument(
        "--node-silence-seconds",
        type=float,
        default=float(_env("FTSPARK_NODE_SILENCE_SECONDS", str(NODE_SILENCE_SECONDS)) or 0),
        help="give a driver a standby once its node has not renewed its Lease for this long (0: off; needs "
        "list/watch on Leases in kube-node-lease)",
    )
    parser.add_argument(
        "--ui-ingress",
        choices=("true", "false"),
        default=_env("FTSPARK_UI_INGRESS", "false"),
        help="give each job with spec.ui an Ingress unless its spec says otherwise",
    )
    parser.add_argument("--ui-ingress-class", default=_env("FTSPARK_UI_INGRESS_CLASS"))
    parser.add_argument("--ui-ingress-host", default=_env("FTSPARK_UI_INGRESS_HOST"))
    parser.add_argument("--ui-ingress-tls-secret", default=_env("FTSPARK_UI_INGRESS_TLS_SECRET"))
    parser.add_argument(
        "--storage-prefixes",
        default=_env("FTSPARK_STORAGE_PREFIXES", ""),
        help="comma-separated s3:// prefixes every job's checkpoint.storage must be under (default: any)",
    )
    parser.add_argument(
        "--allow",
        default=_env("FTSPARK_ALLOW", ""),
        help="comma-separated job policy allowances for every namespace, e.g. hostPath (default: none)",
    )
    args = parser.parse_args(argv)
    watched = tuple(n.strip() for n in args.watch_namespaces.split(",") if n.strip())
    try:
        return OperatorConfig(
            identity=args.identity,
            namespace=args.namespace,
            watch_namespaces=watched,
            lease_name=args.lease_name,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            workers=args.workers,
            kubeconfig=args.kubeconfig,
            s3_endpoint=args.s3_endpoint,
            s3_region=args.s3_region,
            ha_store=args.ha_store,
            ha_s3_root=args.ha_s3_root,
            result_sweep_seconds=args.result_sweep_seconds,
            checkpoint_refreshes_per_second=args.checkpoint_refreshes_per_second,
            max_result_retention_seconds=args.max_result_retention_seconds,
            max_results_per_namespace=args.max_results_per_namespace,
            default_ttl_seconds_after_finished=args.default_ttl_seconds_after_finished,
            driver_disruption_budget=args.driver_disruption_budget == "true",
            node_silence_seconds=args.node_silence_seconds,
            ui_ingress={  # validated with the rest: a problem names --ui-ingress
                "enabled": args.ui_ingress == "true",
                "class_name": args.ui_ingress_class,
                "host": args.ui_ingress_host,
                "tls_secret_name": args.ui_ingress_tls_secret,
            },
            probe_port=args.probe_port,
            allow=frozenset(a.strip() for a in args.allow.split(",") if a.strip()),
            storage_prefixes=tuple(p.strip() for p in args.storage_prefixes.split(",") if p.strip()),
        )
    except ValidationError as error:  # one line naming the flag and the problem, not a traceback
        parser.error("; ".join(flag_problem(e["loc"], str(e["msg"])) for e in error.errors()))


def flag_problem(location: tuple[int | str, ...], message: str) -> str:
    """A field's problem under its flag's name; a check across fields names them itself."""
    message = message.removeprefix("Value error, ")
    return f"--{str(location[0]).replace('_', '-')}: {message}" if location else message
