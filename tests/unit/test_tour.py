"""The fault tours' own guards: a tour's verdict reads its sink folder, so it must start empty; its sampler's
probe of a replica killed while answering is "no answer", not an exception that ends the sampler."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import cast

import pytest

from ftspark_dev.cluster.operators import probe
from ftspark_dev.scenarios.tour import FaultTour, TourWorld


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


def test_a_replica_killed_while_answering_a_probe_is_no_answer() -> None:
    """It sent its headers and died before its body (seen in CI: the sampler thread died on IncompleteRead
    and the tour stopped counting acting leaders)."""
    with socket.create_server(("127.0.0.1", 0)) as server:

        def answer_half() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")

        thread = threading.Thread(target=answer_half)
        thread.start()
        status, _ = probe(f"http://127.0.0.1:{server.getsockname()[1]}/healthz")
        thread.join()
    assert status == 0
