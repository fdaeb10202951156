"""The chart's ValidatingAdmissionPolicy is generated from the job policy's rules (the API server runs it in
tests/integration/test_policy.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ftspark import admission
from ftspark.domain.policy import ALLOWANCES, RULES, STORAGE_PREFIXES_ANNOTATION, storage_message

TEMPLATE = Path(__file__).resolve().parents[2] / "helm" / "ftspark-operator" / "templates" / "job-policy.yaml"


def test_chart_template_matches_the_rules() -> None:
    assert TEMPLATE.read_text() == admission.render(), "the chart's job policy drifted: run `make crds`"


def test_one_validation_per_rule_naming_its_field() -> None:
    own_namespace, *checks, _ = admission.policy_spec("[]")["validations"]
    assert own_namespace["expression"].startswith("request.namespace != ")
    assert len(checks) == len(RULES)
    for rule, check in zip(RULES, checks, strict=True):
        assert check["message"].startswith("spec." + rule.field.replace("[]", "[*]") + ": ")
        assert (rule.allowance is None) == ("variables.allowedEverywhere" not in check["expression"])


def test_chart_values_name_the_same_allowances() -> None:
    schema = json.loads((TEMPLATE.parents[1] / "values.schema.json").read_text())
    assert schema["properties"]["jobPolicy"]["properties"]["allow"]["items"]["enum"] == list(ALLOWANCES)


def test_storage_is_bounded_only_when_the_installation_lists_prefixes_and_named_in_the_operators_words() -> (
    None
):
    """As the operator: no installation prefix, anywhere (a namespace's annotation adds to the list, it does
    not start one); the message is outside_storage's, the API server filling in the storage and prefixes."""
    spec = admission.policy_spec("[]", '["s3://b/x"]')
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert variables["storageEverywhere"] == '["s3://b/x"]'
    assert (
        f"'{STORAGE_PREFIXES_ANNOTATION}' in namespaceObject.metadata.annotations"
        in variables["storagePrefixes"]
    )
    storage = spec["validations"][-1]
    assert storage["expression"].startswith("size(variables.storageEverywhere) == 0 || ")
    assert storage["message"].startswith("spec.checkpoint.storage: ")
    filled = (
        storage["messageExpression"]
        .replace("' + object.spec.checkpoint.storage + '", "s3://o/j")
        .replace("' + variables.storagePrefixes.join(', ') + '", "s3://b/x, s3://c")
    )
    assert filled == f"'{storage_message('s3://o/j', 's3://b/x, s3://c')}'"
