"""Generated documentation stays in step with what it documents."""

from __future__ import annotations

from ftspark_dev.generate.reference import TARGET, render


def test_field_reference_matches_the_models() -> None:
    assert TARGET.read_text() == render(), "docs/reference.md drifted from the models: run `make docs`"


def test_every_spec_field_is_in_the_reference() -> None:
    text = TARGET.read_text()
    for field in (
        "spec.checkpoint.storage",
        "spec.restartStrategy.exponentialDelay.jitterFactor",
        "spec.upgradeMode",
    ):
        assert f"`{field}`" in text
