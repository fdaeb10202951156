"""The real-node tier: kubelets, containerd and runc on this machine run the images `make images` built.

It needs root (network links, cgroups, mounts); without it the tests fail, they are not skipped: CI runs as
root, and a tier that silently does not run proves nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftspark_dev.realnodes.images import INSTALLATION, OWN_IMAGE_BUILD, built_images


@pytest.fixture(scope="session")
def images() -> dict[str, Path]:
    assert os.geteuid() == 0, "the real-node tier needs root: links, cgroups and mounts of its own"
    return built_images(*INSTALLATION, OWN_IMAGE_BUILD)
