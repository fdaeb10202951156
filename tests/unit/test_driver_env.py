"""Every FTSPARK_ variable the operator sets or the driver runtime reads is named in ftspark.protocol
(DriverEnv: what the operator sets; RuntimeEnv: the runtime's own settings): one place, no name drifts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ftspark.protocol import DriverEnv, RuntimeEnv

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "ftspark"
_NAME = re.compile(r"FTSPARK_[A-Z_]+")
# The Spark image runs classdata.py before ftspark is installed: it imports nothing of ftspark, so it names
# its own two variables (FTSPARK_CLASS_DATA_DIR, which the image sets; the development cache's FTSPARK_CACHE).
STANDALONE = {PACKAGE / "runtime" / "classdata.py"}


def _spelled(path: Path) -> list[str]:
    """The FTSPARK_ names a module spells as a string of their own, outside docstrings and comments."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _NAME.fullmatch(node.value)
    ]


def test_the_driver_side_spells_no_variable_of_its_own() -> None:
    modules = [PACKAGE / "manifests.py", *sorted((PACKAGE / "runtime").glob("*.py"))]
    spelled = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in modules
        if path not in STANDALONE
        for name in _spelled(path)
    }
    assert spelled == set(), (
        "name these in ftspark.protocol (DriverEnv or RuntimeEnv) and use them from there"
    )


def test_the_check_finds_a_spelled_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Reads FTSPARK_DOC."""\nimport os\nX = os.environ.get("FTSPARK_SOMETHING")\n')
    assert _spelled(module) == ["FTSPARK_SOMETHING"]


def test_every_name_is_one_variable() -> None:
    values = [member.value for member in (*DriverEnv, *RuntimeEnv)]
    assert len(values) == len(set(values))
