"""crds/ is generated from the pydantic models, keeps a structural shape, and documents every field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ftspark import KIND, SCHEDULE_KIND, crd

CRDS = Path(__file__).resolve().parents[2] / "crds"
CRD_FILE = CRDS / "ftspark.io_faulttolerantsparkjobs.yaml"
FILES = {KIND: CRD_FILE, SCHEDULE_KIND: CRDS / "ftspark.io_scheduledsparkjobs.yaml"}


@pytest.mark.parametrize("kind", FILES)
def test_crds_in_the_repository_and_the_chart_match_the_models(kind: str) -> None:
    chart_copy = CRDS.parent / "helm" / "ftspark-operator" / "crds" / FILES[kind].name
    assert FILES[kind].read_text() == crd.render(kind), "crds/ drifted from the models: run `make crds`"
    assert chart_copy.read_text() == crd.render(kind), "the chart's CRD drifted: run `make crds`"


def _walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _walk(schema[key], f"{path}[]")


def _root_schema(kind: str = KIND) -> dict[str, Any]:
    document = yaml.safe_load(FILES[kind].read_text())
    schema: dict[str, Any] = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("kind", FILES)
def test_schema_uses_only_structural_constructs(kind: str) -> None:
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const"}
    for path, node in _walk(_root_schema(kind), ""):
        assert not forbidden & node.keys(), f"{path} uses {forbidden & node.keys()}"
        assert node.get("additionalProperties") is not False, path
        has_type = "type" in node or node.get("x-kubernetes-preserve-unknown-fields")
        assert has_type, f"{path} has no type"


@pytest.mark.parametrize("kind", FILES)
def test_every_spec_and_status_field_is_described(kind: str) -> None:
    root = _root_schema(kind)
    for top in ("spec", "status"):
        for path, node in _walk(root["properties"][top], top):
            if path.endswith("[]"):
                continue
            assert node.get("description"), f"{path} has no description (kubectl explain shows it)"


def test_optional_values_become_nullable_without_null_defaults() -> None:
    spec = _root_schema()["properties"]["spec"]["properties"]
    nonce = spec["savepointTriggerNonce"]
    assert nonce["nullable"] is True
    assert nonce["type"] == "integer"
    assert "default" not in nonce
