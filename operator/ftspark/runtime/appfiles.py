"""The application's own files: mainApplicationFile and pyFiles (`spark.submit.pyFiles`).

An s3:// or s3a:// file is fetched with boto3, with the job's S3 settings (objects.s3_client), into a private
temporary directory before Spark starts: the driver runs its script from there, and Spark ships the local
copies of the pyFiles to the executors as it does local pyFiles. local:// and plain paths are used as they
are.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ftspark.adapters.s3.stores import split_uri
from ftspark.runtime.objects import ObjectStore, StorageError

PY_FILES = "spark.submit.pyFiles"
MAIN_SUFFIXES = (".py",)
PY_FILE_SUFFIXES = (".py", ".zip", ".egg")


class ApplicationFileError(Exception):
    """An application file cannot be used: a bad URI, an object that is missing or unreadable, or not a
    file of the expected kind."""


def s3_object(uri: str) -> tuple[str, str] | None:
    """(bucket, key) of an s3:// or s3a:// URI; None for anything else (local:// or a path in the image)."""
    if not uri.startswith(("s3://", "s3a://")):
        return None
    bucket, key = split_uri(uri)
    if not bucket or not key or key.endswith("/"):
        raise ApplicationFileError(f"{uri}: not an S3 object URI (s3://<bucket>/<key>)")
    return bucket, key


def check_name(uri: str, what: str, suffixes: tuple[str, ...]) -> str:
    """The file name an S3 object is fetched as, if it has one of the suffixes Spark accepts for it."""
    name = PurePosixPath(uri).name
    if not name.lower().endswith(suffixes):
        raise ApplicationFileError(f"{what} {uri}: must be a {'/'.join(suffixes)} file")
    return name


def py_files(spark_conf: Mapping[str, str]) -> list[str]:
    return [uri.strip() for uri in spark_conf.get(PY_FILES, "").split(",") if uri.strip()]


@dataclass(frozen=True)
class Application:
    """Where the script and the pyFiles are on this machine."""

    main_file: str
    py_files: tuple[str, ...] = ()

    def spark_conf(self, conf: Mapping[str, str]) -> dict[str, str]:
        """conf with the pyFiles' local copies in place of their URIs."""
        return {**conf, PY_FILES: ",".join(self.py_files)} if self.py_files else dict(conf)


def places(main_file: str, py_file_uris: list[str]) -> dict[str, PurePosixPath]:
    """Where each S3 file goes in the application's directory, all names checked before anything is read.
    A pyFile keeps its name (Python imports a module by its file name); the main file is kept apart, as it
    may share its name with one."""
    found: dict[str, PurePosixPath] = {}
    if s3_object(main_file):
        found[main_file] = PurePosixPath("main", check_name(main_file, "mainApplicationFile", MAIN_SUFFIXES))
    for uri in py_file_uris:
        if s3_object(uri) and uri not in found:
            place = PurePosixPath("py-files", check_name(uri, "pyFile", PY_FILE_SUFFIXES))
            if clash := next((other for other, p in found.items() if p == place), None):
                raise ApplicationFileError(f"pyFiles {clash} and {uri} have the same file name")
            found[uri] = place
    return found


def fetch(
    objects: ObjectStore, main_file: str, py_file_uris: list[str], parent: Path | None = None
) -> Application:
    """The application with every S3 file fetched into one new private directory (under parent, or the
    system's temporary directory); ApplicationFileError names the first file that cannot be had, and why."""
    wanted = places(main_file, py_file_uris)
    local: dict[str, str] = {}
    if wanted:
        folder = Path(tempfile.mkdtemp(prefix="ftspark-app-", dir=parent))  # mode 0700: only ours
        try:
            local = {uri: str(download(objects, uri, folder / place)) for uri, place in wanted.items()}
        except ApplicationFileError:
            shutil.rmtree(folder)  # nothing half fetched is left behind (the driver ends here)
            raise
    # local:// is Spark's name for a file inside the image.
    return Application(
        local.get(main_file, main_file.removeprefix("local://")),
        tuple(local.get(uri, uri) for uri in py_file_uris),
    )


def download(objects: ObjectStore, uri: str, target: Path) -> Path:
    target.parent.mkdir(exist_ok=True)
    try:
        found = objects.download(uri, target)
    except StorageError as error:
        raise ApplicationFileError(f"cannot {error}") from None
    if not found:
        raise ApplicationFileError(f"{uri}: no such object")
    if target.stat().st_size == 0:
        raise ApplicationFileError(f"{uri}: the object is empty")
    return target
