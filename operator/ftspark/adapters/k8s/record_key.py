"""The installation's record key (adapters.seal) in a Secret in the operator's namespace: read by every
replica, created by the first that finds none. It is never rotated by the operator: a new key makes every
job graph and result sealed with the old one untrusted (docs/security.md, "Sealed records")."""

from __future__ import annotations

import base64

from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark.adapters.seal import RecordSeal
from ftspark.protocol import MANAGED

KEY = "key"


def record_seal(api: client.ApiClient, namespace: str, name: str) -> RecordSeal:
    """The seal of the key in Secret namespace/name, made first if there is none (two replicas starting at
    once: the one whose create loses reads the winner's)."""
    core = client.CoreV1Api(api)
    for _ in range(2):
        try:
            secret = core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
        else:
            return RecordSeal(base64.b64decode((secret.data or {}).get(KEY, "")))
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, labels=MANAGED),
            data={KEY: base64.b64encode(RecordSeal.new_key()).decode()},
            type="Opaque",
            immutable=True,
        )
        try:
            core.create_namespaced_secret(namespace, body)
        except ApiException as error:
            if error.status != 409:
                raise
    raise RuntimeError(f"the record key Secret {namespace}/{name} was neither read nor created")
