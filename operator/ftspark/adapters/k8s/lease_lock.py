"""LeaseLock on a coordination.k8s.io/v1 Lease (client-go's LeaseLock), with the synchronous client.

The elector owns the Lease: update replaces it whole, conditional on metadata.resourceVersion. The operator's
lock also keeps a term floor in a ConfigMap beside it (`<lease>-term`): the highest leaseTransitions ever
handed out, so that a Lease deleted and re-created never starts its terms again at 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ftspark.adapters.k8s import request_timeout as k8s_request_timeout
from ftspark.ports.leadership import ConflictError, LeaderElectionRecord, LockUnavailableError
from ftspark.protocol import MANAGED, term_floor_name


def format_micro_time(moment: datetime) -> str:
    """metav1.MicroTime's wire format (RFC 3339, always six fraction digits, UTC): the API server refuses
    isoformat()'s output for whole seconds, which has no fraction."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubernetesLeaseLock:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        request_timeout: float,
        keep_term_floor: bool = False,
        owner: Mapping[str, str] | None = None,
    ) -> None:
        """request_timeout bounds each call, so a hung request cannot hold a leader past its renew deadline
        by more than that: keep it below lease_duration - renew_deadline. keep_term_floor: for a lock whose
        terms fence writes (the operator's; a driver's terms are its attempts). owner: an ownerReference
        the Lease carries on every write, so that it goes with its owner (a driver's, with its job)."""
        self._owner = dict(owner) if owner is not None else None
        self._leases = client.CoordinationV1Api(api)
        self._core = client.CoreV1Api(api)
        self._keep_term_floor = keep_term_floor
        self._floor_version: str | None = None  # of the floor term_floor() read: raising it is a CAS on it
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._timeout = k8s_request_timeout(request_timeout)

    @property
    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return f"{self._namespace}/{self._name}"

    def get(self) -> tuple[LeaderElectionRecord, str] | None:
        try:
            lease = self._leases.read_namespaced_lease(
                self._name, self._namespace, _request_timeout=self._timeout
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise self._unavailable("read", error) from error
        except HTTPError as error:
            raise self._unavailable("read", error) from error
        spec = lease.spec
        record = LeaderElectionRecord(
            holder_identity=spec.holder_identity or "",
            lease_duration_seconds=spec.lease_duration_seconds or 0,
            acquire_time=spec.acquire_time,
            renew_time=spec.renew_time,
            leader_transitions=spec.lease_transitions or 0,
        )
        version: str = lease.metadata.resource_version
        return record, version

    def create(self, record: LeaderElectionRecord) -> str:
        try:
            created = self._leases.create_namespaced_lease(
                self._namespace, self._body(record, version=None), _request_timeout=self._timeout
            )
        except ApiException as error:
            if error.status == 409:
                raise ConflictError(f"lease {self.describe()} already exists") from error
            raise self._unavailable("create", error) from error
        except HTTPError as error:
            raise self._unavailable("create", error) from error
        version: str = created.metadata.resource_version
        return version

    def update(self, record: LeaderElectionRecord, version: str) -> str:
        try:
            replaced = self._leases.replace_namespaced_lease(
                self._name,
                self._namespace,
                self._body(record, version=version),
                _request_timeout=self._timeout,
            )
        except ApiException as error:
            if error.status == 409:
                raise ConflictError(f"lease {self.describe()} changed since version {version}") from error
            raise self._unavailable("update", error) from error
        except HTTPError as error:
            raise self._unavailable("update", error) from error
        new_version: str = replaced.metadata.resource_version
        return new_version

    def term_floor(self) -> int | None:
        found = self._read_floor()
        self._floor_version = None if found is None else found[1]
        return None if found is None else found[0]

    def raise_term_floor(self, term: int) -> None:
        if not self._keep_term_floor:
            return
        try:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self._floor_name,
                    "labels": MANAGED,
                    **({"resourceVersion": self._floor_version} if self._floor_version else {}),
                },
                "data": {"term": str(term)},
            }
            # The elector raises only what term_floor() just read (and only upward): one read per transition.
            if self._floor_version is None:
                self._core.create_namespaced_config_map(self._namespace, body, _request_timeout=self._timeout)
            else:
                self._core.replace_namespaced_config_map(
                    self._floor_name, self._namespace, body, _request_timeout=self._timeout
                )
        except ApiException as error:
            if error.status == 409:  # another contender moved it since it was read: this attempt fails
                raise ConflictError(f"term floor {self._floor_name} changed") from error
            raise self._unavailable("raise the term floor of", error) from error
        except HTTPError as error:
            raise self._unavailable("raise the term floor of", error) from error

    @property
    def _floor_name(self) -> str:
        return term_floor_name(self._name)

    def _read_floor(self) -> tuple[int, str] | None:
        """(term, version) of the floor, None if there is none (or this lock keeps none)."""
        if not self._keep_term_floor:
            return None
        try:
            found = self._core.read_namespaced_config_map(
                self._floor_name, self._namespace, _request_timeout=self._timeout
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise self._unavailable("read the term floor of", error) from error
        except HTTPError as error:
            raise self._unavailable("read the term floor of", error) from error
        # Any whole number as written, or -1 if it is none: the elector decides which floors it can follow
        # (and reports the others), whatever lock holds them.
        term = (found.data or {}).get("term", "")
        return (int(term) if term.isascii() and term.isdigit() else -1), found.metadata.resource_version

    def _body(self, record: LeaderElectionRecord, *, version: str | None) -> dict[str, Any]:
        # A plain dict, so the times go out as MicroTime strings rather than the client's datetime isoformat.
        # Labelled as ftspark's on every write (a replace sets them all): the operator's admission policy lets
        # its token write only Leases so labelled, never a node's or kube-system's.
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace, "labels": MANAGED}
        if self._owner is not None:
            metadata["ownerReferences"] = [self._owner]
        if version is not None:
            metadata["resourceVersion"] = version
        spec: dict[str, Any] = {
            "holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "leaseTransitions": record.leader_transitions,
        }
        if record.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(record.acquire_time)
        if record.renew_time is not None:
            spec["renewTime"] = format_micro_time(record.renew_time)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _unavailable(self, action: str, error: Exception) -> LockUnavailableError:
        detail = f"HTTP {error.status} {error.reason}" if isinstance(error, ApiException) else str(error)
        return LockUnavailableError(f"{action} lease {self.describe()}: {detail}")
