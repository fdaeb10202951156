"""The fault tours' own guard: a tour's verdict reads its sink folder, so it must start empty."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from ftspark_dev.tour import FaultTour, TourWorld


def test_a_tour_refuses_a_sink_folder_holding_another_runs_output(tmp_path: Path) -> None:
    # An earlier run of the same job name in the same folder (the recovery bench's rows once shared one): its
    # batch files and run markers would have been counted as this job's output, batches it ran and this job
    # did not as duplicates, every batch both ran as re-processed.
    world = cast(TourWorld, object())  # never reached: the guard comes first
    earlier = FaultTour(world, tmp_path)
    (earlier.output.folder / "runs").mkdir(parents=True)
    (earlier.output.folder / "batch-7.json").write_text('{"0/k": 1}')
    (earlier.output.folder / "runs" / "7-abc").touch()
    with pytest.raises(ValueError, match="holds another run's output"):
        FaultTour(world, tmp_path).submit()
    assert not earlier.source.exists(), "nothing written for the refused tour"
