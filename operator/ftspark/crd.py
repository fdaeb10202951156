"""Generates the FaultTolerantSparkJob and ScheduledSparkJob CustomResourceDefinitions from the models.

`python -m ftspark.crd [KIND]` prints one; crds/ holds the output and a test fails when the two drift.
Kubernetes wants a structural OpenAPI v3.0 schema: no $ref, no anyOf-with-null, no titles, boolean
exclusive bounds — this module turns pydantic's JSON Schema into that.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from ftspark import API_GROUP, API_VERSION, KIND, PLURAL, SCHEDULE_KIND, SCHEDULE_PLURAL
from ftspark.domain.models import JobSpec, JobStatus, ScheduleSpec, ScheduleStatus
from ftspark.domain.scheduling import MAX_SCHEDULE_NAME_LENGTH
from ftspark.manifests import MAX_JOB_NAME_LENGTH

_DROPPED_KEYS = {"title", "$defs", "discriminator"}
_FORMATS = {"date-time", "int32", "int64", "float", "double", "byte", "date"}

JsonSchema = dict[str, Any]


def _structural(node: JsonSchema, defs: dict[str, JsonSchema]) -> JsonSchema:
    if "$ref" in node:
        target = _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        # Keys beside a $ref (description, default) describe this use of the type and win.
        return {**target, **_structural({k: v for k, v in node.items() if k != "$ref"}, defs)}
    if "anyOf" in node:
        options = [option for option in node["anyOf"] if option.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"only Optional[X] unions fit a structural schema: {node}")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        merged = {**_structural(options[0], defs), **_structural(rest, defs), "nullable": True}
        if merged.get("default", "unset") is None:
            del merged["default"]  # a null default says nothing the apiserver can use
        return merged
    result: JsonSchema = {}
    for key, value in node.items():
        result.update(_keyword(key, value, node, defs))
    if result.get("type") == "object" and "properties" not in result and "additionalProperties" not in result:
        result["x-kubernetes-preserve-unknown-fields"] = True
    return result


def _keyword(key: str, value: Any, node: JsonSchema, defs: dict[str, JsonSchema]) -> JsonSchema:
    """One JSON Schema keyword of node, said the way a structural OpenAPI v3.0 schema says it."""
    if key in _DROPPED_KEYS or (key == "format" and value not in _FORMATS):
        return {}
    if key in {"exclusiveMinimum", "exclusiveMaximum"} and not isinstance(value, bool):
        return {"minimum" if key == "exclusiveMinimum" else "maximum": value, key: True}
    if key == "const":
        return {"enum": [value]}
    if key == "additionalProperties" and isinstance(value, bool):
        # false: the apiserver prunes unknown fields anyway; true: said the structural way.
        return {"x-kubernetes-preserve-unknown-fields": True} if value else {}
    if key in {"additionalProperties", "items"}:
        return {key: _structural(value, defs)}
    if key == "properties":
        return {key: _properties(value, set(node.get("required", ())), defs)}
    return {key: value}


def _properties(
    properties: dict[str, JsonSchema], required: set[str], defs: dict[str, JsonSchema]
) -> JsonSchema:
    converted = {name: _structural(schema, defs) for name, schema in properties.items()}
    for name, schema in converted.items():
        # An omitted optional sub-object gets its fields' defaults stored, so that `kubectl get -o yaml` shows
        # the settings in force. Spelled out (not {}), since CEL rules are checked against the default as is.
        if name not in required and "properties" in schema and not schema.get("nullable"):
            schema.setdefault(
                "default",
                {key: child["default"] for key, child in schema["properties"].items() if "default" in child},
            )
    return converted


def openapi_schema(model: type[Any]) -> JsonSchema:
    raw: JsonSchema = model.model_json_schema(by_alias=True, mode="validation")
    schema: JsonSchema = _structural(raw, raw.get("$defs", {}))
    return schema


def _definition(
    kind: str,
    plural: str,
    short_name: str,
    description: str,
    spec_schema: JsonSchema,
    status_schema: JsonSchema,
    columns: list[dict[str, Any]],
    max_name: int,
    names_what: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short_name],
                "categories": ["all", "ftspark"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        *columns,
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "x-kubernetes-validations": [
                                {
                                    "rule": f"size(self.metadata.name) <= {max_name} && "
                                    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
                                    "message": f"metadata.name: at most {max_name} characters, lowercase "
                                    f"letters, digits and '-', starting with a letter ({names_what})",
                                }
                            ],
                            "properties": {
                                "apiVersion": {
                                    "type": "string",
                                    "description": "Versioned schema of this object.",
                                },
                                "kind": {
                                    "type": "string",
                                    "description": "The REST resource this object represents.",
                                },
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def custom_resource_definition() -> dict[str, Any]:
    return _definition(
        KIND,
        PLURAL,
        "ftsj",
        "A PySpark application kept running with checkpoints, savepoints, restart strategies and a highly "
        "available, leader-elected operator.",
        openapi_schema(JobSpec),
        openapi_schema(JobStatus),
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Attempt", "type": "integer", "jsonPath": ".status.attempt"},
            {
                "name": "Checkpoint",
                "type": "integer",
                "description": "Id of the newest completed checkpoint (the job's counter).",
                "jsonPath": ".status.latestCheckpoint.id",
            },
            {
                "name": "Checkpointed",
                "type": "date",
                "description": "How long ago that checkpoint completed: a job that stopped making progress "
                "shows it growing.",
                "jsonPath": ".status.latestCheckpoint.time",
            },
            {
                "name": "Batch",
                "type": "integer",
                "description": "The Spark micro-batch that checkpoint committed.",
                "jsonPath": ".status.latestCheckpoint.batchId",
                "priority": 1,
            },
            {
                "name": "Savepoint",
                "type": "string",
                "description": "Id of the newest savepoint in the status.",
                "jsonPath": ".status.savepoints[-1:].id",
                "priority": 1,
            },
            {
                "name": "Failure",
                "type": "string",
                "description": "Why the last attempt that failed ended.",
                "jsonPath": ".status.lastFailure.reason",
                "priority": 1,
            },
        ],
        MAX_JOB_NAME_LENGTH,
        "it names the driver pod <name>-<attempt>-driver and Spark's executor pods",
    )


def schedule_resource_definition() -> dict[str, Any]:
    return _definition(
        SCHEDULE_KIND,
        SCHEDULE_PLURAL,
        "ssj",
        "FaultTolerantSparkJobs started on a cron schedule, one per time due.",
        openapi_schema(ScheduleSpec),
        openapi_schema(ScheduleStatus),
        [
            {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
            {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
            {"name": "Last", "type": "date", "jsonPath": ".status.lastScheduleTime"},
            {"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime"},
            {"name": "Run", "type": "string", "jsonPath": ".status.lastRun", "priority": 1},
        ],
        MAX_SCHEDULE_NAME_LENGTH,
        "each run is a FaultTolerantSparkJob <name>-<minute>",
    )


def render(kind: str = KIND) -> str:
    """The CRD of kind (FaultTolerantSparkJob, ScheduledSparkJob) as crds/ holds it."""
    definition = schedule_resource_definition() if kind == SCHEDULE_KIND else custom_resource_definition()
    header = (
        f"# Generated by `python -m ftspark.crd {kind}` from ftspark.domain.models; do not edit by hand.\n"
    )
    return header + yaml.safe_dump(definition, sort_keys=False, width=120)


if __name__ == "__main__":
    sys.stdout.write(render(*sys.argv[1:2]))
