"""A standby driver (FTSPARK_STANDBY=1): its session is up before it is needed; it writes nothing and takes
no Lease, even one that lapsed, until the operator promotes it; then it goes on from the checkpoint, exactly
once. The test plays the operator: it advances the fence, then writes the promote request."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import Any

from kubernetes import client

from ftspark.protocol import CONTROL_REFUSED_ANNOTATION, driver_lease_name
from ftspark_dev.subjects.windowed_counts import write_input
from tests.runtime.conftest import OPERATOR, RuntimeJob
from tests.waiting import eventually

STANDING_BY = "standing by: spark session ready"
WARMED = "standing by: 1 executors warmed in"
CUT_SHORT = "standing by: promoted during its 1 executors' warm-up, cut short"


def _written(job: RuntimeJob) -> dict[str, Any]:
    """Every object of the job's namespace a driver may write (ConfigMaps, Leases), by resourceVersion,
    and every object under its storage prefix, by ETag."""
    core, leases = client.CoreV1Api(job.api), client.CoordinationV1Api(job.api)
    bucket, _, prefix = job.storage.removeprefix("s3://").partition("/")
    listed = job.s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {
        "configmaps": {
            c.metadata.name: c.metadata.resource_version
            for c in core.list_namespaced_config_map(job.namespace).items
        },
        "leases": {
            lease.metadata.name: lease.metadata.resource_version
            for lease in leases.list_namespaced_lease(job.namespace).items
        },
        "objects": {o["Key"]: o["ETag"] for o in listed},
    }


def _holder(job: RuntimeJob) -> str:
    lease = client.CoordinationV1Api(job.api).read_namespaced_lease(
        driver_lease_name(job.name), job.namespace
    )
    return str(lease.spec.holder_identity or "")


def test_a_standby_writes_nothing_until_promoted_then_goes_on_exactly_once(make_job: Any) -> None:
    """It keeps an executor (on the local master, its tasks run in the driver's JVM), warmed up once it is
    Ready: the warm-up reads the job's storage and writes nothing of it either."""
    job: RuntimeJob = make_job()
    write_input(job.input, 2)
    active = job.start()
    job.wait_for_output(2, timeout=180)
    holder = _holder(job)

    standby = job.start(standby=True, FTSPARK_STANDBY_EXECUTORS="1")
    eventually(
        lambda: STANDING_BY in job.log(), timeout=180, what=lambda: f"the standby's session\n{job.log()}"
    )

    # The active driver frozen past its Lease: the Lease lapses, and still the standby neither takes it nor
    # writes anything (no operator has promoted it), its executor's warm-up included.
    os.killpg(active.pid, signal.SIGSTOP)
    before = _written(job)
    eventually(lambda: WARMED in job.log(1000), timeout=120, what=lambda: f"the warm-up\n{job.log()}")
    time.sleep(3 * 3 + 1)  # three lease durations of the test's 3 s
    assert _written(job) == before, "nothing was written while the active driver was frozen"
    assert _holder(job) == holder, "the standby took no Lease without its promotion"
    assert standby.poll() is None, job.log()

    # The active driver's pod is killed; a promotion by a deposed operator leader is refused.
    os.killpg(active.pid, signal.SIGKILL)
    active.wait(30)
    job.request("promote", "", term=OPERATOR.term - 1)
    refused = eventually(
        lambda: job.pod_annotations().get(CONTROL_REFUSED_ANNOTATION),
        timeout=30,
        what="the stale promotion refused",
    )
    assert "below the term floor" in json.loads(refused)["reason"]
    assert _holder(job) == holder and standby.poll() is None, job.log()

    runs = sum(job.output.runs().values())
    promoted = time.monotonic()
    job.promote()
    write_input(job.input, 2, first_file=2)
    job.wait_for_new_batch(runs, timeout=120)
    took = time.monotonic() - promoted
    job.wait_for_output(4, timeout=120)
    print(f"\nstandby promoted -> first batch run: {took:.1f} s")
    assert _holder(job) == f"{job.pod}@{job.attempt}"
    # It read the Lease while standing by: it saw the frozen holder's last renew long before its promotion
    # (a Lease first read at the promotion is taken a lease duration, 3 s, after that read).
    taken = re.search(r"holding lease \S+ \(taken over ([0-9.]+) s after", job.log(1000))
    assert taken and float(taken[1]) > 2 * 3, job.log(1000)
    log = job.log(1000)
    assert "promoted after" in log and log.count("spark session ready in") == 1, "one session: the standby's"
    assert job.output.reprocessed_records() == 0, "the killed driver was idle: no batch ran again"


def test_a_promotion_that_comes_before_the_warm_up_ends_is_taken_at_once(make_job: Any) -> None:
    """A standby is Ready, so promotable, once its session is up; its executors' warm-up comes after, and a
    promotion cuts it short (a standby made when its node fell silent may be promoted that soon). Here the
    promotion is written before the session is up: the standby reads it as soon as it is Ready."""
    job: RuntimeJob = make_job()
    write_input(job.input, 2)
    active = job.start()
    job.wait_for_output(2, timeout=180)
    os.killpg(active.pid, signal.SIGKILL)
    active.wait(30)

    job.start(standby=True, FTSPARK_STANDBY_EXECUTORS="1")
    job.promote()
    write_input(job.input, 2, first_file=2)
    job.wait_for_output(4, timeout=180)
    log = job.log(1000)
    assert WARMED not in log and CUT_SHORT in log, log
    assert log.index(STANDING_BY) < log.index(CUT_SHORT) < log.index("promoted after"), log
