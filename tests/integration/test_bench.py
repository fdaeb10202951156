"""The operator bench's short run (`make bench` bursts 1,000 jobs, then 100 and 5,000 on fresh installations):
a burst of new jobs, driver failures answered during it, and what a submitted job costs the API server; then
drivers reporting checkpoints, whose status refreshes keep to the operator's budget."""

from __future__ import annotations

import pytest
from kubernetes import client

from ftspark_dev.benches.operator_figures import burst, checkpointing, installation, print_table
from ftspark_dev.cluster.operators import job_status, set_driver_running
from tests.waiting import eventually

JOBS = 60
# A failed driver the burst answers costs passes of its own: the failure, the restart after its delay, the
# old pod's deletion events.
FAILURE_PASSES = 6
CHECKPOINTING = 30  # of the jobs, the last ones: their first attempt runs
REFRESHES_PER_SECOND = 1.0  # unpaced, their reports (every 10 s) would wake a pass per report: 3 a second


@pytest.mark.timeout(600)
def test_a_burst_gets_every_driver_pod_in_one_pass_each_and_checkpoint_reports_keep_a_budget() -> None:
    with installation(REFRESHES_PER_SECOND) as bench:
        figures = burst(bench, JOBS)
        core = client.CoreV1Api(bench.api)
        names = [f"job-{index:04d}" for index in range(JOBS - CHECKPOINTING, JOBS)]
        for name in names:
            set_driver_running(core, bench.namespace, f"{name}-1-driver")
        eventually(  # their passes for the drivers' start are over: what follows is the reports'
            lambda: all(job_status(bench.api, bench.namespace, n).get("phase") == "Running" for n in names),
            timeout=60,
            what="the drivers running",
        )
        reports = checkpointing(bench, CHECKPOINTING, window=20.0)
    print_table(["measure", "value", "target"], [list(row) for row in figures.rows() + reports.rows()])

    calls, failures = figures.calls, len(figures.failures_answered)
    passes = calls["get", "faulttolerantsparkjobs"]  # every pass reads its job first
    assert JOBS <= passes <= JOBS + FAILURE_PASSES * failures, (
        f"{passes} passes: one per new job, the echoes of its own writes wake none"
    )
    # A new job's pass lists its driver pods, nothing more; a failed job's passes (the rest) may also count
    # its leftover executors, while it has no driver pod. How many passes that is depends on how the old
    # pod's events arrive (one pass or several, on a busy machine), so the bound counts passes.
    assert calls["list", "pods"] <= passes + (passes - JOBS), (
        "one listing of its driver pods per pass; executors are listed only before a restart"
    )
    # A new job's pass reads its job graph and a result of its uid once each (the two records it creates are
    # not read first); a failure's passes read its checkpoints too and the records they replace.
    assert calls["get", "configmaps"] <= 2 * JOBS + 16 * failures, calls.most_common()

    # The drivers' reports wake passes at the budget: neither more (one per report) nor idle while statuses
    # wait. The first are due 5 s after the first reports.
    refreshes, seconds = reports.calls["get", "faulttolerantsparkjobs"], reports.minutes * 60
    assert REFRESHES_PER_SECOND * (seconds - 7) <= refreshes <= REFRESHES_PER_SECOND * seconds + 2, (
        f"{refreshes} passes in {seconds:.1f} s of checkpoint reports"
    )
    shown = [age for age in reports.ages if age != float("inf")]
    assert len(shown) >= refreshes - 2, "each pass showed its job's newest checkpoint"
