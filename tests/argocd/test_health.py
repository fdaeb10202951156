"""The Argo CD health check, run by a real Lua 5.1 interpreter (Argo CD's gopher-lua speaks 5.1) over
Argo CD's own test-case format, and the argocd-cm snippet kept in step with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa.lua51 import LuaRuntime

ROOT = Path(__file__).resolve().parents[2] / "argocd"
CHECK = ROOT / "resource_customizations" / "ftspark.io" / "FaultTolerantSparkJob"
CASES = yaml.safe_load((CHECK / "health_test.yaml").read_text())["tests"]


def _to_lua(lua: LuaRuntime, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({key: _to_lua(lua, item) for key, item in value.items()})
    if isinstance(value, list):
        return lua.table_from([_to_lua(lua, item) for item in value])  # 1-based, like Argo's conversion
    return value


def health(obj: dict[str, Any]) -> dict[str, str]:
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = _to_lua(lua, obj)
    result = lua.execute((CHECK / "health.lua").read_text())
    return {"status": result["status"], "message": result["message"]}


@pytest.mark.parametrize("case", CASES, ids=[Path(c["inputPath"]).stem for c in CASES])
def test_health_verdict(case: dict[str, Any]) -> None:
    obj = yaml.safe_load((CHECK / case["inputPath"]).read_text())
    assert health(obj) == case["healthStatus"]


def test_every_phase_has_a_verdict() -> None:
    phases = yaml.safe_load((ROOT.parent / "crds" / "ftspark.io_faulttolerantsparkjobs.yaml").read_text())[
        "spec"
    ]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]["enum"]
    for phase in phases:
        verdict = health({"metadata": {"generation": 1}, "status": {"phase": phase, "observedGeneration": 1}})
        assert verdict["status"] in {"Healthy", "Progressing", "Suspended", "Degraded"}, phase
        assert verdict["message"], phase


def test_argocd_cm_snippet_carries_the_same_script() -> None:
    snippet = yaml.safe_load((ROOT / "argocd-cm-patch.yaml").read_text())
    key = "resource.customizations.health.ftspark.io_FaultTolerantSparkJob"
    assert snippet["data"][key] == (CHECK / "health.lua").read_text(), "run `make argocd`"
