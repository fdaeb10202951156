"""Driver self-fencing: the job's driver Lease `<job>-driver`, held while any query runs, so two attempts
never run queries at once; a driver that cannot renew in time stops every query and exits before another
attempt may take the Lease (docs/driver-runtime.md). The operator's leader elector does the work and tells
the driver at once (on_lost); its renew watchdog tells it too when a renew call hangs past the deadline."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from kubernetes import client

from ftspark.adapters.k8s.lease_lock import KubernetesLeaseLock
from ftspark.leader.elector import LeaderElectionConfig, LeaderElector
from ftspark.ports.leadership import LockUnavailableError
from ftspark.protocol import driver_lease_name, job_owner_reference
from ftspark.runtime.config import RuntimeConfig

log = logging.getLogger(__name__)


class DriverLease:
    def __init__(self, api: client.ApiClient, config: RuntimeConfig, on_lost: Callable[[str], None]) -> None:
        """api must not retry on its own (configuration.retries = 0): the elector's deadline is the bound."""
        self._on_lost = on_lost
        self._name = f"{config.job.namespace}/{driver_lease_name(config.job.name)}"
        lock = KubernetesLeaseLock(
            api,
            namespace=config.job.namespace,
            name=driver_lease_name(config.job.name),
            identity=config.identity,
            # A hung request must not outlast the margin between our deadline and the others' takeover.
            request_timeout=max(0.5, (config.lease_duration - config.renew_deadline) * 0.8),
            # Deleted with the job by the garbage collector, even if a stopping driver writes it once more.
            owner=job_owner_reference(config.job.name, config.job_uid),
        )
        election = LeaderElectionConfig(
            identity=config.identity,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
        )
        self._elector = LeaderElector(
            election, lock, on_started_leading=lambda _: self._held.set(), on_stopped_leading=self._stopped
        )
        self._held = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._elector.run, args=(self._stop,), name="driver-lease")
        self._watchdog = threading.Thread(
            target=self._elector.watch_renewals, args=(self._stop, self._overdue), name="lease-watchdog"
        )
        self._lost = threading.Lock()  # on_lost once, from the elector or the watchdog
        self._told = False
        self._retry_period = config.retry_period

    @contextlib.contextmanager
    def followed(self) -> Iterator[None]:
        """While a standby waits: the Lease read every retry period, never written, so that a Lease which
        lapsed meanwhile (its holder's node lost) is taken at the first try once the standby may take it."""
        done = threading.Event()
        follower = threading.Thread(target=self._follow, args=(done,), name="lease-follower", daemon=True)
        follower.start()
        try:
            yield
        finally:
            done.set()
            follower.join()  # before acquire(): the elector is not shared between threads

    def _follow(self, done: threading.Event) -> None:
        failure = ""
        while not done.is_set():
            try:
                self._elector.observe()
            except LockUnavailableError as error:
                if str(error) != failure:  # once per kind of failure
                    failure = str(error)
                    log.warning("cannot read the driver lease %s: %s", self._name, error)
            done.wait(self._retry_period)

    def acquire(self, timeout: float) -> bool:
        """Wait until the Lease is ours (the previous attempt's must expire first); False after timeout."""
        self._thread.daemon = True
        self._thread.start()
        if self._held.wait(timeout):
            gap = self._elector.takeover_gap
            how = "free" if not gap else f"taken over {gap:.1f} s after the last renew this driver saw"
            log.info("holding lease %s (%s)", self._name, how)
            self._watchdog.daemon = True
            self._watchdog.start()
            return True
        self._stop.set()
        return False

    def release(self, timeout: float = 5.0) -> None:
        """Give the Lease up (the next attempt need not wait for it to expire)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _stopped(self) -> None:
        self._lose(f"lost the driver lease {self._name} (not renewed within its deadline, or taken)")

    def _overdue(self, since: float) -> None:
        self._lose(f"the driver lease {self._name} was last renewed {since:.1f} s ago, past its deadline")

    def _lose(self, why: str) -> None:
        with self._lost:
            if self._stop.is_set() or self._told:
                return
            self._told = True
        self._on_lost(why)
