"""Generated documentation stays in step with what it documents."""

from __future__ import annotations

import re

from ftspark.cli import _status_lines
from ftspark.domain.remedies import REMEDIES, remedy_for
from ftspark_dev.cluster.processes import REPO_ROOT
from ftspark_dev.generate import reference, troubleshooting


def test_field_reference_matches_the_models() -> None:
    assert reference.TARGET.read_text() == reference.render(), (
        "docs/reference.md drifted from the models: run `make docs`"
    )


def test_every_spec_field_is_in_the_reference() -> None:
    text = reference.TARGET.read_text()
    for field in (
        "spec.checkpoint.storage",
        "spec.restartStrategy.exponentialDelay.jitterFactor",
        "spec.upgradeMode",
    ):
        assert f"`{field}`" in text


def test_troubleshooting_matches_the_remedies() -> None:
    assert troubleshooting.TARGET.read_text() == troubleshooting.render(), (
        "docs/troubleshooting.md drifted from ftspark.domain.remedies: run `make docs`"
    )


def test_every_reason_the_driver_ends_with_has_a_remedy() -> None:
    runtime = REPO_ROOT / "operator" / "ftspark" / "runtime"
    said = {
        reason
        for path in runtime.glob("*.py")
        for reason in re.findall(r'(?:ending\.set\(Exit\.\w+,|fence_out\()\s*"(\w+)"', path.read_text())
    }
    assert said >= {"ScriptFailed", "LeaseLost", "MainFileMissing"}, f"the search finds them: {said}"
    assert said - {"Finished"} <= REMEDIES.keys(), "every reason a driver ends with has a row"


def test_status_says_what_to_do_for_the_reason_that_applies_now() -> None:
    waiting = {"type": "Degraded", "status": "True", "reason": "DriverUnschedulable", "message": "0/3 nodes"}
    status = {"phase": "Submitting", "conditions": [waiting], "lastFailure": {"reason": "OOMKilled"}}
    assert remedy_for(status) == ("DriverUnschedulable", REMEDIES["DriverUnschedulable"]), "now, not before"
    blocked = {"type": "Ready", "status": "False", "reason": "RestartsExhausted", "message": "none left"}
    found = remedy_for({**status, "conditions": [blocked, waiting]})
    assert found is not None and found[0] == "RestartsExhausted", "what stops the job first"
    stuck = {"type": "Reconciled", "status": "False", "reason": "OperatorError", "message": "S3 refused"}
    found = remedy_for({**status, "conditions": [blocked, waiting, stuck]})
    assert found is not None and found[0] == "OperatorError", "the operator cannot act: before all"
    assert remedy_for({"lastFailure": {"reason": "OOMKilled"}}) == ("OOMKilled", REMEDIES["OOMKilled"])
    assert remedy_for({"phase": "Running"}) is None
    job = {"metadata": {"namespace": "ns", "name": "j"}, "spec": {}, "status": status}
    assert _status_lines(job)[-1].startswith("what to do:     DriverUnschedulable: lower spec.driver.cores")
