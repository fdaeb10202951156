"""What the prose points at exists: every `docs/<file>.md` a docstring, comment or doc names (with the section
it names, if any), every relative link in the docs (with its anchor), and every repository path in backticks.

A section is named as it reads: a heading, or the bold lead of a paragraph or list item (`**Sealed records:
...**`), matched by its beginning. The project stands on its own: nothing points outside the repository.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PROSE_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".tpl", ".txt", "Makefile", "Dockerfile")
# What a path in backticks may be relative to: the repository, the product and harness packages, the chart.
_PATH_BASES = ("", "operator", "operator/ftspark", "tools", "tools/ftspark_dev", "helm/ftspark-operator")

_DOC_REFERENCE = re.compile(r'docs/([\w-]+\.md)(?:,?\s+"([^"]+)")?')
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_PATH = re.compile(
    r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|sh|yaml|java|xml))`"  # a path with at least one directory
)
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
_BOLD_LEAD = re.compile(r"\*\*(?:\d+[a-z]?\. )?([^*]+)\*\*")
_OUTSIDE = re.compile(r"\.\./shared|DESIGN(?:\.md| §)")


def _tracked() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    own = Path(__file__).resolve()  # its examples of broken references are on purpose
    paths = [ROOT / name for name in names if name.endswith(_PROSE_SUFFIXES)]
    return [path for path in paths if path.is_file() and path != own]


@cache
def _sections(doc: Path) -> tuple[str, ...]:
    text = doc.read_text()
    found = _HEADING.findall(text) + _BOLD_LEAD.findall(text)
    return tuple(" ".join(section.split()) for section in found)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _has_section(doc: Path, section: str) -> bool:
    wanted = " ".join(section.split())
    return any(found.startswith(wanted) for found in _sections(doc))


def _broken_doc_references(source: Path, text: str) -> list[str]:
    broken = []
    for match in _DOC_REFERENCE.finditer(text):
        doc = ROOT / "docs" / match.group(1)
        if not doc.is_file():
            broken.append(f"{match.group(0)}: no such file")
        elif match.group(2) and not _has_section(doc, match.group(2)):
            broken.append(f"{' '.join(match.group(0).split())}: no such section")
    return broken


def _broken_links(source: Path, text: str) -> list[str]:
    broken = []
    for target in _LINK.findall(_CODE_SPAN.sub("", text)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (source.parent / path).resolve() if path else source
        if not linked.exists():
            broken.append(f"]({target}): no such file")
        elif anchor and linked.suffix == ".md" and anchor not in {_slug(h) for h in _sections(linked)}:
            broken.append(f"]({target}): no such anchor")
    return broken


def _broken_paths(text: str) -> list[str]:
    return [
        f"`{path}`: no such file"
        for path in _PATH.findall(text)
        if "<" not in path and not any((ROOT / base / path).exists() for base in _PATH_BASES)
    ]


def test_every_reference_in_the_prose_exists() -> None:
    broken = []
    for source in _tracked():
        text = source.read_text(errors="replace")
        problems = _broken_doc_references(source, text) + _broken_paths(text)
        if source.suffix == ".md":
            problems += _broken_links(source, text)
        broken += [f"{source.relative_to(ROOT)}: {problem}" for problem in problems]
    assert broken == [], "references to nothing:\n" + "\n".join(broken)


def test_nothing_points_outside_the_repository() -> None:
    outside = [
        f"{source.relative_to(ROOT)}: {match.group(0)}"
        for source in _tracked()
        for match in _OUTSIDE.finditer(source.read_text(errors="replace"))
    ]
    assert outside == [], "the project must stand on its own:\n" + "\n".join(outside)


def test_the_checks_find_what_is_broken(tmp_path: Path) -> None:
    """The checks above can fail: each kind of broken reference is found."""
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n**Bold lead:** text\n\n[x](missing.md) [y](#nowhere) [z](#title) `[w](no.md)`")
    assert _broken_links(doc, doc.read_text()) == [
        "](missing.md): no such file",
        "](#nowhere): no such anchor",
    ]
    assert _has_section(doc, "Bold lead") and _has_section(doc, "Title") and not _has_section(doc, "Other")
    named = 'docs/testing.md, "No such section" and docs/no-such-file.md'
    assert _broken_doc_references(doc, named) == [
        'docs/testing.md, "No such section": no such section',
        "docs/no-such-file.md: no such file",
    ]
    assert _broken_paths("`ftspark/domain/restart.py` `ftspark/domain/gone.py`") == [
        "`ftspark/domain/gone.py`: no such file"
    ]
