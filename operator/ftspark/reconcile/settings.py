"""What a Reconciler is built from, grouped by who decides it: the ports it acts through, the job policy an
admin grants, what every driver is told of its installation, the result store's caps, and the defaults of
fields a job leaves unset."""

from __future__ import annotations

from dataclasses import dataclass, field

from ftspark.domain.models import JobSpec, UiIngressSpec
from ftspark.ports.blobs import BlobStore
from ftspark.ports.checkpoints import CheckpointInspector
from ftspark.ports.cluster import DriverLogs, Drivers, Events, Jobs, Nodes
from ftspark.ports.stores import HaStores
from ftspark.protocol import HaStoreConfig

# The operator's caps on the result store (app/config.py makes them settings): no result is kept longer than
# this, whatever its job's ttlSeconds (0 included), and no namespace keeps more clean results than this.
MAX_RESULT_RETENTION_SECONDS = 30 * 24 * 3600
MAX_RESULTS_PER_NAMESPACE = 1000


@dataclass(frozen=True)
class Ports:
    """The API server's objects, the HA stores, the jobs' storage (spec.checkpoint.storage, where
    savepoints and retired checkpoint directories are looked at and deleted), the kept driver logs, and the
    nodes being drained."""

    jobs: Jobs
    drivers: Drivers
    events: Events
    stores: HaStores
    inspector: CheckpointInspector
    storage: BlobStore
    logs: DriverLogs
    nodes: Nodes


@dataclass(frozen=True)
class JobPolicy:
    """allowed: the job policy's allowances granted in every namespace (ftspark.domain.policy);
    storage_prefixes: where jobs may keep their storage in every namespace (none: anywhere);
    own_namespace: the operator's, where it never runs a job."""

    allowed: frozenset[str] = frozenset()
    storage_prefixes: tuple[str, ...] = ()
    own_namespace: str = ""


@dataclass(frozen=True)
class DriverSettings:
    """What every driver is told of its installation: term_floor, <namespace>/<name> of the operator's
    term floor ConfigMap; ha_store, where the HA records live (its drivers write checkpoint records there)."""

    term_floor: str
    ha_store: HaStoreConfig = field(default_factory=HaStoreConfig)


@dataclass(frozen=True)
class ResultLimits:
    max_retention_seconds: int = MAX_RESULT_RETENTION_SECONDS
    max_per_namespace: int = MAX_RESULTS_PER_NAMESPACE


@dataclass(frozen=True)
class JobDefaults:
    """The installation's values of spec fields a job leaves unset (the chart's jobDefaults)."""

    ttl_seconds_after_finished: int | None = None
    # Whether the installation watches nodes for drains, and so gives drivers a disruption budget (unless
    # their spec says not to): without the watch, a budget would hold a drain off for ever.
    driver_disruption_budget: bool = False
    ui_ingress: UiIngressSpec = field(
        default_factory=UiIngressSpec
    )  # each field a job's ui.ingress leaves unset

    def applied_to(self, spec: JobSpec) -> JobSpec:
        ttl = spec.ttl_seconds_after_finished
        budget = spec.driver.disruption_budget
        ingress = spec.ui.ingress
        unset = {name: value for name, value in self.ui_ingress if getattr(ingress, name) is None}
        return spec.model_copy(
            update={
                "ttl_seconds_after_finished": self.ttl_seconds_after_finished if ttl is None else ttl,
                "driver": spec.driver.model_copy(
                    update={"disruption_budget": self.driver_disruption_budget and budget is not False}
                ),
                "ui": spec.ui.model_copy(update={"ingress": ingress.model_copy(update=unset)}),
            }
        )
