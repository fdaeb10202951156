"""The lifecycle's named delays: when a decision asks to be looked at again, in seconds."""

from __future__ import annotations

# Watches wake a job on every change of it or its driver pods; this is only a safety net.
POLL = 300.0
SOON = 0.05  # seconds: look again at once, after this decision's status write
# Seconds: look again while waiting for something to go or come (a pod, a stop). The watches wake the job
# when it does; this is the fallback, which the controller backs off while passes change nothing
# (reconcile.pacing.WaitBackoff).
WAIT = 1.0
QUOTA_RETRY = 10.0  # seconds between tries of an attempt a ResourceQuota had no room for
DISPOSAL_RECHECK = 10.0  # seconds: a disposal's deletes leave the status as it was: no write wakes the job
# Seconds: while an earlier attempt's executors end. The end of each wakes the job (handlers.watch, the pod
# watch); this is the fallback, for an end that came while the watch was down.
EXECUTORS_RECHECK = 10.0
STANDBY_RECHECK = 1.0  # seconds: a standby being deleted is made again once its pod is gone
# seconds: while a standby waits for the attempt's first checkpoint. Its report wakes the job too (within the
# watch's refresh delay, or the S3 poll's); this look does not depend on that wake arriving.
FIRST_COMMIT_RECHECK = 5.0
