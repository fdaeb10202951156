"""The seal on the HA records only the operator writes (job graphs, job results): an HMAC-SHA256 with a key
only the operator holds, over the record's identity and data.

These records sit where others can write too: job graphs in the job's namespace (ConfigMaps) or under the
HA store's root on S3, results in the operator's namespace or under that root, which the drivers' credentials
reach. What a record says decides what the operator deletes (a result's data), whether a job runs again (a
result for its uid) and where an attempt keeps its state (a graph's checkpoint location), so a record whose
seal does not verify is treated as not there: never followed, never deleted from, counted and reported.

The record's identity (kind and key: "result <uid>", "jobgraph <namespace>/<name>") is sealed with it, so a
genuine record copied under another job's name or uid, or a dirty result copied as a clean one, does not
verify either. The key lives in a Secret in the operator's namespace (adapters.k8s.record_key), created by
the first replica that finds none.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping

SEAL = "seal"  # the data key the seal is kept under, next to what it seals
KEY_BYTES = 32


class RecordSeal:
    def __init__(self, key: bytes) -> None:
        if len(key) < KEY_BYTES:
            raise ValueError(f"a record key has at least {KEY_BYTES} bytes, not {len(key)}")
        self._key = key

    @staticmethod
    def new_key() -> bytes:
        return secrets.token_bytes(KEY_BYTES)

    def sealed(self, identity: str, data: Mapping[str, str]) -> dict[str, str]:
        """data with its seal added (a seal already there is replaced)."""
        unsealed = {k: v for k, v in data.items() if k != SEAL}
        return {**unsealed, SEAL: self._mac(identity, unsealed)}

    def verifies(self, identity: str, data: Mapping[str, str]) -> bool:
        seal = data.get(SEAL, "")
        unsealed = {k: v for k, v in data.items() if k != SEAL}
        return bool(seal) and hmac.compare_digest(seal, self._mac(identity, unsealed))

    def _mac(self, identity: str, data: Mapping[str, str]) -> str:
        message = json.dumps([identity, data], sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()
