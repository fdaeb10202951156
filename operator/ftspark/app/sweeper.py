"""`python -m ftspark.app.sweeper`: the per-node sweeper of localRecovery's directories (the chart's
DaemonSet, localRecovery.sweeper). Every interval: list the jobs, scan `<root>/jobs/<namespace>/<uid>`,
remove the directories of jobs that are gone (untouched for the grace period) and the oldest copies of live
jobs over their byte bound (domain.localstate decides, adapters.localstate deletes). A pass whose listing
fails deletes nothing: an API server out of reach is not "no job is live"."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ftspark.adapters.k8s import kube_configuration
from ftspark.adapters.k8s.live_jobs import live_job_uids
from ftspark.adapters.localstate import LocalStateDisk
from ftspark.app.config import flag_problem
from ftspark.app.probes import serve
from ftspark.domain.localstate import SweepLimits, parse_bytes, plan_sweep
from ftspark.domain.models import LocalRecoverySpec
from ftspark.metrics import (
    LOCAL_STATE_BYTES_FREED,
    LOCAL_STATE_DIRS_REMOVED,
    LOCAL_STATE_OVER_BOUND,
    LOCAL_STATE_SWEEPS,
)

log = logging.getLogger("ftspark.sweeper")

DEFAULT_MAX_BYTES_PER_JOB = "50Gi"


class SweeperConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str = Field(
        default=LocalRecoverySpec().host_path,
        pattern=r"^/",
        description="spec.localRecovery.hostPath of the jobs on this node, mounted at the same path.",
    )
    interval_seconds: float = Field(default=300.0, gt=0, description="Time between two passes.")
    grace_seconds: float = Field(
        default=600.0,
        ge=60,
        description="A gone job's directory goes once nothing in it changed for this long (a job created "
        "after a listing is not gone); a live job's copies newer than this are never removed.",
    )
    max_bytes_per_job: int | None = Field(
        default=parse_bytes(DEFAULT_MAX_BYTES_PER_JOB),
        gt=0,
        description="A live job's directory above this loses its oldest copies (none: no bound).",
    )
    watch_namespaces: tuple[str, ...] = Field(
        default=(), description="The namespaces whose jobs' directories are swept; empty: all."
    )
    kubeconfig: str | None = None
    probe_port: int = Field(default=0, ge=0, le=65535, description="Port of /metrics and /healthz; 0: none.")
    once: bool = Field(default=False, description="One pass, then exit (non-zero if it could not list).")

    @field_validator("root")
    @classmethod
    def _normalized(cls, root: str) -> str:
        root = os.path.normpath(root)
        if root in ("/", "//"):
            raise ValueError("the node's / is no localRecovery root")
        return root

    def limits(self) -> SweepLimits:
        return SweepLimits(grace_seconds=self.grace_seconds, max_bytes_per_job=self.max_bytes_per_job)


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _bytes_or_none(text: str) -> int | None:
    value = parse_bytes(text)
    return value or None


def parse(argv: list[str] | None = None) -> SweeperConfig:
    parser = argparse.ArgumentParser(prog="ftspark-local-state-sweeper", description=__doc__)
    parser.add_argument("--root", default=_env("FTSPARK_LOCAL_STATE_ROOT", LocalRecoverySpec().host_path))
    parser.add_argument("--interval", default=_env("FTSPARK_SWEEP_INTERVAL_SECONDS", "300"), help="seconds")
    parser.add_argument("--grace", default=_env("FTSPARK_SWEEP_GRACE_SECONDS", "600"), help="seconds")
    parser.add_argument(
        "--max-bytes-per-job",
        default=_env("FTSPARK_MAX_BYTES_PER_JOB", DEFAULT_MAX_BYTES_PER_JOB),
        help="bytes, or a quantity such as 50Gi; 0: no bound",
    )
    parser.add_argument(
        "--watch-namespaces",
        default=_env("FTSPARK_WATCH_NAMESPACES", ""),
        help="comma-separated namespaces whose jobs' directories are swept (default: all)",
    )
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--probe-port", default=_env("FTSPARK_PROBE_PORT", "0"))
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    try:
        max_bytes = _bytes_or_none(args.max_bytes_per_job)
    except ValueError as error:
        parser.error(f"--max-bytes-per-job: {error}")
    try:
        return SweeperConfig(
            root=args.root,
            interval_seconds=args.interval,
            grace_seconds=args.grace,
            max_bytes_per_job=max_bytes,
            watch_namespaces=tuple(n.strip() for n in args.watch_namespaces.split(",") if n.strip()),
            kubeconfig=args.kubeconfig,
            probe_port=args.probe_port,
            once=args.once,
        )
    except ValidationError as error:
        names = {"interval_seconds": "interval", "grace_seconds": "grace"}
        parser.error(
            "; ".join(
                flag_problem(tuple(names.get(str(p), p) for p in e["loc"]), str(e["msg"]))
                for e in error.errors()
            )
        )


@dataclass(frozen=True)
class SweepReport:
    dirs_removed: int
    files_removed: int
    bytes_freed: int
    failures: int
    still_over: int
    kept_unknown_namespace: int


def sweep_once(
    disk: LocalStateDisk,
    list_live: Callable[[], frozenset[str]],
    limits: SweepLimits,
    *,
    namespaces: frozenset[str] | None = None,
    now: Callable[[], float] = time.time,
) -> SweepReport | None:
    """One pass; None, and nothing deleted, if the jobs could not be listed (then the disk is not even
    scanned) or the root could not be scanned."""
    try:
        live = list_live()
    except Exception:  # whatever failed, the listing is not complete: delete nothing
        log.exception("local-state sweep skipped: the jobs could not be listed, so nothing is deleted")
        LOCAL_STATE_SWEEPS.labels("list_failed").inc()
        return None
    try:
        scanned = disk.scan()
    except OSError:
        log.exception("local-state sweep skipped: %s cannot be scanned", disk.root)
        LOCAL_STATE_SWEEPS.labels("scan_failed").inc()
        return None
    plan = plan_sweep(scanned, live, limits, now(), namespaces=namespaces)
    dirs = files = freed = failures = 0
    for removal in plan.removals:
        failed = disk.remove_dir(removal.namespace, removal.uid)
        failures += failed
        if not failed:
            dirs += 1
            freed += removal.size
            LOCAL_STATE_DIRS_REMOVED.inc()
            LOCAL_STATE_BYTES_FREED.labels("job_gone").inc(removal.size)
            log.info(
                "removed %s/%s: its job is gone (%d bytes)", removal.namespace, removal.uid, removal.size
            )
    for trim in plan.trims:
        removed = disk.remove_files(trim.namespace, trim.uid, trim.files)
        files += removed.files
        freed += removed.bytes
        failures += removed.failures
        LOCAL_STATE_BYTES_FREED.labels("over_bound").inc(removed.bytes)
        log.info(
            "%s/%s over its bound: removed its %d oldest copies (%d bytes)%s",
            trim.namespace,
            trim.uid,
            removed.files,
            removed.bytes,
            f"; still {trim.still_over} bytes over (recent or Spark's own files)" if trim.still_over else "",
        )
    still_over = sum(t.still_over for t in plan.trims)
    LOCAL_STATE_OVER_BOUND.set(still_over)
    LOCAL_STATE_SWEEPS.labels("done").inc()
    return SweepReport(dirs, files, freed, failures, still_over, plan.kept_unknown_namespace)


def api_client(cfg: SweeperConfig) -> client.ApiClient:
    api = client.ApiClient(kube_configuration(cfg.kubeconfig))
    api.user_agent = f"ftspark-local-state-sweeper ({os.environ.get('NODE_NAME', 'node')})"
    return api


def run(cfg: SweeperConfig, stop: threading.Event) -> int:
    api = api_client(cfg)
    disk = LocalStateDisk(Path(cfg.root))
    namespaces = frozenset(cfg.watch_namespaces) or None
    last: list[float] = []
    if cfg.probe_port:
        serve(
            cfg.probe_port,
            healthy=lambda: (True, f"last pass {time.time() - last[-1]:.0f} s ago" if last else "starting"),
            ready=lambda: True,
        )
    log.info(
        "sweeping %s/jobs every %.0f s (grace %.0f s, bound %s bytes per job, namespaces: %s)",
        cfg.root,
        cfg.interval_seconds,
        cfg.grace_seconds,
        cfg.max_bytes_per_job or "no",
        ",".join(cfg.watch_namespaces) or "all",
    )
    while True:
        report = sweep_once(
            disk, lambda: live_job_uids(api, cfg.watch_namespaces), cfg.limits(), namespaces=namespaces
        )
        last.append(time.time())
        del last[:-1]
        if cfg.once:
            return 0 if report is not None else 1
        if stop.wait(cfg.interval_seconds):
            return 0


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = parse(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    sys.exit(run(cfg, stop))


if __name__ == "__main__":
    main()
