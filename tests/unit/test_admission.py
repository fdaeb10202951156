"""The chart's ValidatingAdmissionPolicy is generated from the job policy's rules (the API server runs it in
tests/integration/test_policy.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ftspark import admission
from ftspark.domain.policy import ALLOWANCES, RULES

TEMPLATE = Path(__file__).resolve().parents[2] / "helm" / "ftspark-operator" / "templates" / "job-policy.yaml"


def test_chart_template_matches_the_rules() -> None:
    assert TEMPLATE.read_text() == admission.render(), "the chart's job policy drifted: run `make crds`"


def test_one_validation_per_rule_naming_its_field() -> None:
    own_namespace, *checks = admission.policy_spec("[]")["validations"]
    assert own_namespace["expression"].startswith("request.namespace != ")
    assert len(checks) == len(RULES)
    for rule, check in zip(RULES, checks, strict=True):
        assert check["message"].startswith("spec." + rule.field.replace("[]", "[*]") + ": ")
        assert (rule.allowance is None) == ("variables.allowedEverywhere" not in check["expression"])


def test_chart_values_name_the_same_allowances() -> None:
    schema = json.loads((TEMPLATE.parents[1] / "values.schema.json").read_text())
    assert schema["properties"]["jobPolicy"]["properties"]["allow"]["items"]["enum"] == list(ALLOWANCES)
