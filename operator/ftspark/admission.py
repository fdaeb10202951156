"""The job policy (ftspark.domain.policy) as a ValidatingAdmissionPolicy: the API server refuses at apply time
what the operator would refuse before creating anything, with the same allowances.

`python -m ftspark.admission` prints the chart's template (helm/ftspark-operator/templates/job-policy.yaml);
a test fails when the two drift. Each rule becomes one validation, so the message names its field.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from ftspark import API_GROUP, PLURAL
from ftspark.domain.policy import (
    NAMESPACE_LABEL_PREFIX,
    RULES,
    STORAGE_FIELD,
    STORAGE_PREFIXES_ANNOTATION,
    Differs,
    IsTrue,
    KeyMatches,
    LiteralNamed,
    Matches,
    NonEmpty,
    Present,
    Rule,
    Test,
    ToleratesAll,
    storage_message,
)

Manifest = dict[str, Any]
_KEY = "\x00"  # where a message names the offending key of a map (or a value the API server puts in)


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _leaf(value: str, test: Test) -> str | None:
    """CEL that is true when a set field fails the test (None: being set is enough)."""
    match test:
        case Present():
            return None
        case IsTrue():
            return f"{value} == true"
        case NonEmpty():
            return f"size({value}) > 0"
        case KeyMatches():
            return f"{value}.exists(k, {_key_matches(test)})"
        case Matches(pattern=pattern):
            return f"{value}.matches(r'{pattern}')"
        case LiteralNamed(pattern=pattern):
            named = f"has({value}.name) && {value}.name.matches(r'{pattern}')"
            return f"{named} && has({value}.value) && size({value}.value) > 0"
        case ToleratesAll():
            keyless = f"(!has({value}.key) || {value}.key == '')"
            return f"has({value}.operator) && {value}.operator == 'Exists' && {keyless}"
        case Differs(value=expected):
            return f"{value} != {_literal(expected)}"


def _key_matches(test: KeyMatches) -> str:
    matches = f"k.matches(r'{test.pattern}')"
    return f"{matches} && !k.matches(r'{test.unless}')" if test.unless else matches


def _violated(value: str, parts: list[str], test: Test, depth: int = 0) -> str:
    """CEL that is true when the field under `value` is set and fails the test (has() guards every step)."""
    head, *rest = parts
    child = f"{value}.{head.removesuffix('[]')}"
    if head.endswith("[]"):
        element = f"e{depth}"
        inner = _violated(element, rest, test, depth + 1) if rest else _leaf(element, test) or "true"
        return f"has({child}) && {child}.exists({element}, {inner})"
    then = _violated(child, rest, test, depth) if rest else _leaf(child, test)
    return f"has({child})" + (f" && {then}" if then else "")


def _guard(rule: Rule) -> tuple[str, str] | None:
    """A variable that says whether the part of the spec a rule looks into (spec.driver.podTemplate, say) is
    there at all, and its CEL: a variable is evaluated once per request, so a job without a pod template
    passes the template's fifty-odd checks at one lookup each (in a burst of new jobs, the policy's checks
    had been the largest part of their admission's CPU)."""
    parts = rule.field.split(".")
    if len(parts) < 3 or any(part.endswith("[]") for part in parts[:2]):
        return None
    parent, child = parts[:2]
    name = f"has{parent[0].upper()}{parent[1:]}{child[0].upper()}{child[1:]}"
    return name, f"has(object.spec.{parent}) && has(object.spec.{parent}.{child})"


def validation(rule: Rule) -> Manifest:
    violated = _violated("object.spec", rule.field.split("."), rule.test)
    guard = _guard(rule)
    granted = (
        []
        if rule.allowance is None
        else [
            f"{_literal(rule.allowance)} in variables.allowedEverywhere",
            f"{_literal(NAMESPACE_LABEL_PREFIX + rule.allowance)} in variables.allowedHere",
        ]
    )
    field = "spec." + rule.field.replace("[]", "[*]")
    absent = [] if guard is None else [f"!variables.{guard[0]}"]
    expression = " || ".join([*absent, *granted, f"!({violated})"])
    check: Manifest = {"expression": expression, "reason": "Forbidden"}
    if isinstance(rule.test, KeyMatches):
        before, after = rule.message(f'{field}["{_KEY}"]').split(_KEY)
        keys = f"object.spec.{rule.field}.filter(k, {_key_matches(rule.test)})"
        check["messageExpression"] = f"{_literal(before)} + {keys}[0] + {_literal(after)}"
    check["message"] = rule.message(field)
    return check


def _storage_root(uri: str) -> str:
    """CEL for ftspark.domain.policy.storage_root: s3a:// written s3://, trailing slashes cut (the longest
    start that ends in another character; find gives '' when there is none, as rstrip does)."""
    return f"({uri}.startsWith('s3a://') ? 's3://' + {uri}.substring(6) : {uri}).find(r'(?s)^.*[^/]')"


def storage_validation() -> Manifest:
    """ftspark.domain.policy.outside_storage: with the installation's prefixes set, the job's storage must be
    under one of them or of its namespace's annotation (storage_within, in CEL); none set: anywhere."""
    storage = f"object.spec.{STORAGE_FIELD}"
    parent = storage.rpartition(".")[0]
    root = "variables.storageRoot"
    within = f"{root} == r || {root}.startsWith(r + '/')"
    before, between, after = storage_message(_KEY, _KEY).split(_KEY)  # the storage, then the prefixes
    return {
        "expression": f"size(variables.storageEverywhere) == 0 || !has({parent}) || !has({storage}) || "
        f"variables.storagePrefixes.map(p, {_storage_root('p')}).exists(r, {within})",
        "reason": "Forbidden",
        "messageExpression": f"{_literal(before)} + {storage} + {_literal(between)} + "
        f"variables.storagePrefixes.join(', ') + {_literal(after)}",
        "message": storage_message("its storage", "the installation's and the namespace's storage prefixes"),
    }


def _storage_variables(installation: str) -> list[Manifest]:
    annotations = "namespaceObject.metadata.annotations"
    key = _literal(STORAGE_PREFIXES_ANNOTATION)
    named = f"{annotations}[{key}].split(',').map(p, p.trim()).filter(p, p != '')"
    return [
        {"name": "storageEverywhere", "expression": installation},  # the installation's prefixes
        {
            "name": "storagePrefixes",  # then the namespace's (ftspark.domain.policy.storage_prefixes)
            "expression": f"variables.storageEverywhere + "
            f"(has({annotations}) && {key} in {annotations} ? {named} : [])",
        },
        {"name": "storageRoot", "expression": _storage_root(f"object.spec.{STORAGE_FIELD}")},
    ]


_OWN_NAMESPACE = "__OWN_NAMESPACE__"  # the operator's namespace, which the chart puts in


def policy_spec(installation: str, storage: str = "[]") -> Manifest:
    """installation: a CEL list of the allowances granted everywhere; storage: a CEL list of the storage
    prefixes every job must be under (the chart puts its values there)."""
    labels = "namespaceObject.metadata.labels"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [API_GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [PLURAL],
                }
            ]
        },
        "variables": [
            {"name": "allowedEverywhere", "expression": installation},
            {
                "name": "allowedHere",  # the namespace's allow.ftspark.io/<allowance> labels set to "true"
                "expression": f"has({labels}) ? {labels}.filter(k, "
                f"k.startsWith({_literal(NAMESPACE_LABEL_PREFIX)}) && {labels}[k] == 'true') : []",
            },
            *_storage_variables(storage),
            *(
                {"name": name, "expression": expression}
                for name, expression in dict(filter(None, map(_guard, RULES))).items()
            ),
        ],
        "validations": [
            {
                # Cluster-wide, the operator's own namespace is watched too; the operator refuses such a job.
                "expression": f"request.namespace != {_literal(_OWN_NAMESPACE)}",
                "reason": "Forbidden",
                "message": f"the operator's own namespace {_OWN_NAMESPACE} runs no jobs (its Lease, results "
                "and record key live there): create the job in another namespace",
            },
            *(validation(rule) for rule in RULES),
            storage_validation(),
        ],
    }


def render() -> str:
    """The chart's template: the policy with the chart's allowances, bound to the operator's namespaces."""
    placeholder, storage = "__INSTALLATION__", "__STORAGE_PREFIXES__"
    body = yaml.safe_dump(policy_spec(placeholder, storage), sort_keys=False, width=1_000_000)
    spec = "".join(f"  {line}\n" for line in body.splitlines())
    spec = spec.replace(placeholder, "{{ toJson .Values.jobPolicy.allow | quote }}")
    spec = spec.replace(storage, "{{ toJson .Values.jobPolicy.storagePrefixes | quote }}")
    spec = spec.replace(_OWN_NAMESPACE, "{{ .Release.Namespace }}")
    return f"""{{{{- if .Values.jobPolicy.admission }}}}
# Generated by `python -m ftspark.admission` from ftspark.domain.policy; do not edit by hand.
{{{{- $name := printf "%s-%s" (include "ftspark.fullname" .) .Release.Namespace }}}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{{{ $name }}}}
  labels: {{{{- include "ftspark.labels" . | nindent 4 }}}}
spec:
{spec}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{{{ $name }}}}
  labels: {{{{- include "ftspark.labels" . | nindent 4 }}}}
spec:
  policyName: {{{{ $name }}}}
  validationActions: [Deny]
  {{{{- with .Values.watchNamespaces }}}}
  matchResources:
    namespaceSelector:
      matchExpressions:
        - {{key: kubernetes.io/metadata.name, operator: In, values: {{{{ toJson . }}}}}}
  {{{{- end }}}}
{{{{- end }}}}
"""


if __name__ == "__main__":
    sys.stdout.write(render())
