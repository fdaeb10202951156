"""The seal on every HA record: an HMAC-SHA256 over the record's identity, its data and its fences.

The records sit where others can write too: job graphs and checkpoint records in the job's namespace
(ConfigMaps) or under the HA store's root on S3, which every driver's credentials reach; results in the
operator's namespace or under that root. What a record says decides what the operator deletes (a result's
data), whether a job runs again (a result for its uid), where an attempt keeps its state (a graph's checkpoint
location), what a new attempt restores (a checkpoint pointer) and who may still write (its fences: a forged
fence at 2^62 would refuse the job's every writer). So a record whose seal does not verify is treated as not
there: never followed, never deleted from, its fences not obeyed, replaced by the next real write; the stores
count and report it.

Two keys:
- the installation's record key, which only the operator holds (a Secret in its namespace,
  adapters.k8s.record_key): job graphs and results, which only the operator writes;
- a job's checkpoint key, derived from it for the job's checkpoint record (`job_key`): the operator gives
  it to the job's drivers (in each attempt's Secret), which write that record too. Another job's driver
  does not have it, so it cannot forge the record's pointers or fences.

The identity (kind and key: "result <uid>", "jobgraph <namespace>/<name>") is sealed with the data, so a
genuine record copied under another job's name or uid, or a dirty result copied as a clean one, does not
verify either; the fences are sealed with it, so a genuine record's fences cannot be raised.
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

    def job_key(self, job: str) -> bytes:
        """The checkpoint key of job ("<namespace>/<name>"): what its drivers seal its checkpoint record with.
        Derived, so the operator keeps no key per job; one-way, so it tells nothing of the record key."""
        return hmac.new(self._key, f"checkpoints {job}".encode(), hashlib.sha256).digest()

    def seal(self, identity: str, data: Mapping[str, str], fences: Mapping[str, int]) -> str:
        """The seal of a record's data (without a seal of its own) and fences."""
        message = json.dumps([identity, data, fences], sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def verifies(self, identity: str, data: Mapping[str, str], fences: Mapping[str, int], seal: str) -> bool:
        return bool(seal) and hmac.compare_digest(seal, self.seal(identity, data, fences))
