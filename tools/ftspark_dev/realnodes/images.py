"""The project's images, as `make images` built them: reference → OCI archive, for containerd to import."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ftspark_dev.cluster.processes import REPO_ROOT

OPERATOR_IMAGE = "ftspark/operator:0.1.0"
# tools/images/build.sh's names: what an installation runs, and the user-style image of docs/own-image.md.
INSTALLATION = ("pause", "operator", "spark-py", "s3")
OWN_IMAGE_BUILD = "own-image"


def built_images(*names: str) -> dict[str, Path]:
    """Builds what is missing of the named images (default: an installation's; cached by sources) and returns
    their archives. Build errors surface."""
    result = subprocess.run(
        [str(REPO_ROOT / "tools" / "images" / "build.sh"), *(names or INSTALLATION)],
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
