"""The project's images, as `make images` built them: reference → OCI archive, for containerd to import."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ftspark_dev.cluster.processes import REPO_ROOT

OPERATOR_IMAGE = "ftspark/operator:0.1.0"


def built_images() -> dict[str, Path]:
    """Builds what is missing (cached by sources) and returns every image's archive. Build errors surface."""
    result = subprocess.run(
        [str(REPO_ROOT / "tools" / "images" / "build.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=3600,
    )
    images: dict[str, Path] = {}
    for line in result.stdout.splitlines():
        reference, _, archive = line.strip().partition(" ")
        if archive:
            images[reference] = Path(archive)
    return images
