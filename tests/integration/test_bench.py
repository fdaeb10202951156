"""The operator bench's short run (`make bench` bursts 1,000 jobs, then 100 and 5,000 on fresh installations):
a burst of new jobs, driver failures answered during it, and what a submitted job costs the API server."""

from __future__ import annotations

import pytest

from ftspark_dev.bench import burst, installation, print_table

JOBS = 60
# A failed driver the burst answers costs passes of its own: the failure, the restart after its delay, the
# old pod's deletion events.
FAILURE_PASSES = 6


@pytest.mark.timeout(600)
def test_a_burst_of_new_jobs_gets_every_driver_pod_and_each_job_one_pass() -> None:
    with installation() as bench:
        figures = burst(bench, JOBS)
    print_table(["measure", "value", "target"], [list(row) for row in figures.rows()])

    calls, failures = figures.calls, len(figures.failures_answered)
    passes = calls["get", "faulttolerantsparkjobs"]  # every pass reads its job first
    assert JOBS <= passes <= JOBS + FAILURE_PASSES * failures, (
        f"{passes} passes: one per new job, the echoes of its own writes wake none"
    )
    assert calls["list", "pods"] <= passes + 2 * failures, (
        "one listing of its driver pods per pass; executors are listed only before a restart"
    )
    # A new job's pass reads its job graph and a result of its uid once each (the two records it creates are
    # not read first); a failure's passes read its checkpoints too and the records they replace.
    assert calls["get", "configmaps"] <= 2 * JOBS + 16 * failures, calls.most_common()
