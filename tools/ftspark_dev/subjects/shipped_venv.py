"""A packed virtualenv as a job ships one in spec.deps.archives (docs/dependencies.md), laid out as
venv-pack lays one out: the venv's root at the archive's root, bin/python a link to the base interpreter,
and a package of its own, `shipped_only`, that no image or venv of this project has.

Shared by the driver-runtime tests (tests/runtime) and the end-to-end suite (e2e/).
"""

from __future__ import annotations

import io
import sys
import tarfile

PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"
PACKAGE = "shipped_only"
MARK = "+venv"


def venv_archive(python: str = PYTHON, extra: dict[str, bytes] | None = None) -> bytes:
    """The .tar.gz of a virtualenv made with `python` (its lib/<python>/site-packages), extra files added."""
    site = f"lib/{python}/site-packages"
    files = {
        "pyvenv.cfg": b"home = /usr/bin\ninclude-system-site-packages = false\n",
        "bin/activate": b"",
        f"{site}/{PACKAGE}/__init__.py": f"MARK = {MARK!r}\n".encode(),
        **(extra or {}),
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        link = tarfile.TarInfo("bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        archive.addfile(link)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
