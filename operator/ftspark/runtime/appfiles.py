"""The application's own files: mainApplicationFile and what spec.deps ships (pyFiles, files, jars and
archives, in spark.submit.pyFiles, spark.files, spark.jars and spark.archives; docs/dependencies.md).

An s3:// or s3a:// entry is fetched with boto3, with the job's S3 settings (objects.s3_client), into a
private temporary directory before Spark starts, once per attempt: the driver runs its script from there,
and Spark ships the local copies to the executors as it ships local files. local:// and plain paths are used
as they are. A packed virtualenv among the archives (one holding lib/python3.X/site-packages) is unpacked for
the driver too, its site-packages put on the driver's Python path and, through PYTHONPATH, on the executors'
(where Spark unpacks it into their working directory).
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ftspark.adapters.s3.stores import split_uri
from ftspark.domain.deps import ARCHIVES, DEP_KINDS, DepKind, check, split_alias, unpacked_name
from ftspark.runtime.objects import ObjectStore, StorageError, TooLargeError

MAIN = DepKind("mainApplicationFile", "", "mainApplicationFile", (".py",))
EXECUTOR_PYTHONPATH = "spark.executorEnv.PYTHONPATH"
_SITE_PACKAGES = re.compile(r"^(?:\./)?(lib/python(\d+)\.(\d+)/site-packages)/")


class ApplicationFileError(Exception):
    """An application file cannot be used: a bad URI, an object that is missing, unreadable, too large, or
    not a file of the expected kind."""


def s3_object(uri: str) -> tuple[str, str] | None:
    """(bucket, key) of an s3:// or s3a:// URI; None for anything else (local:// or a path in the image)."""
    if not uri.startswith(("s3://", "s3a://")):
        return None
    bucket, key = split_uri(uri)
    if not bucket or not key or key.endswith("/"):
        raise ApplicationFileError(f"{uri}: not an S3 object URI (s3://<bucket>/<key>)")
    return bucket, key


def shipped(spark_conf: Mapping[str, str]) -> dict[DepKind, list[str]]:
    """Each kind's entries, as the operator wrote them into the Spark settings."""
    return {
        kind: [entry.strip() for entry in spark_conf.get(kind.conf_key, "").split(",") if entry.strip()]
        for kind in DEP_KINDS
    }


@dataclass(frozen=True)
class Application:
    """Where the script and the shipped files are on this machine."""

    main_file: str
    entries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # Spark setting → local entries
    python_paths: tuple[str, ...] = ()  # unpacked virtualenvs' site-packages, for the driver
    executor_python_paths: tuple[str, ...] = ()  # the same, relative to an executor's working directory

    def spark_conf(self, conf: Mapping[str, str]) -> dict[str, str]:
        """conf with the local copies in place of the URIs, and the virtualenvs on the executors' path."""
        settings = {**conf, **{key: ",".join(entries) for key, entries in self.entries.items() if entries}}
        if self.executor_python_paths:
            theirs = [conf[EXECUTOR_PYTHONPATH]] if conf.get(EXECUTOR_PYTHONPATH) else []
            settings[EXECUTOR_PYTHONPATH] = ":".join([*self.executor_python_paths, *theirs])
        return settings


def places(main_file: str, wanted: Mapping[DepKind, list[str]]) -> dict[str, PurePosixPath]:
    """Where each S3 object goes in the application's directory, all names checked before anything is read.
    Each keeps its name (Python imports a module by its file name, SparkFiles.get finds a file by it) in a
    folder of its kind's; the main file is kept apart, as it may share its name with one."""
    found: dict[str, PurePosixPath] = {}
    for kind, entries in [(MAIN, [main_file]), *wanted.items()]:
        for entry in entries:
            location, _ = split_alias(entry)
            if not s3_object(location) or location in found:
                continue
            try:
                check(kind, entry)
            except ValueError as error:
                raise ApplicationFileError(f"{kind.field} {error}") from None
            place = PurePosixPath(kind.field, PurePosixPath(location).name)
            if clash := next((other for other, p in found.items() if p == place), None):
                raise ApplicationFileError(f"{kind.field} {clash} and {location} have the same file name")
            found[location] = place
    return found


def fetch(
    objects: ObjectStore,
    main_file: str,
    wanted: Mapping[DepKind, list[str]],
    parent: Path | None = None,
    max_bytes: int | None = None,
) -> Application:
    """The application with every S3 object fetched into one new private directory (under parent, or the
    system's temporary directory) and its virtualenvs unpacked; ApplicationFileError names the first entry
    that cannot be had, and why."""
    to_fetch = places(main_file, wanted)
    folder = Path(tempfile.mkdtemp(prefix="ftspark-app-", dir=parent))  # mode 0700: only ours
    try:
        local = {
            uri: str(download(objects, uri, folder / place, max_bytes)) for uri, place in to_fetch.items()
        }

        def here(entry: str) -> str:
            location, alias = split_alias(entry)
            # local:// is Spark's name for a file inside the image.
            path = local.get(location, location.removeprefix("local://"))
            return path if alias is None else f"{path}#{alias}"

        entries = {kind.conf_key: tuple(here(entry) for entry in wanted[kind]) for kind in wanted}
        venvs = [
            (entry, site)
            for entry in wanted.get(ARCHIVES, [])
            if (site := site_packages(Path(split_alias(here(entry))[0])))
        ]
        unpacked = tuple(
            str(unpack(Path(split_alias(here(entry))[0]), site, folder / "venvs" / unpacked_name(entry)))
            for entry, site in venvs
        )
        app = Application(
            here(main_file),
            entries,
            unpacked,
            tuple(f"./{unpacked_name(entry)}/{site}" for entry, site in venvs),
        )
    except ApplicationFileError:
        shutil.rmtree(folder)  # nothing half fetched is left behind (the driver ends here)
        raise
    if not any(folder.iterdir()):
        folder.rmdir()
    return app


def download(objects: ObjectStore, uri: str, target: Path, max_bytes: int | None = None) -> Path:
    target.parent.mkdir(exist_ok=True)
    try:
        found = objects.download(uri, target, max_bytes)
    except StorageError as error:
        raise ApplicationFileError(f"cannot {error}") from None
    except TooLargeError as error:
        raise ApplicationFileError(f"{error} (spec.deps.maxFileMiB)") from None
    if not found:
        raise ApplicationFileError(f"{uri}: no such object")
    if target.stat().st_size == 0:
        raise ApplicationFileError(f"{uri}: the object is empty")
    return target


def _names(archive: Path) -> list[str]:
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as opened:
                return opened.namelist()
        with tarfile.open(archive) as tar:
            return tar.getnames()
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as error:
        raise ApplicationFileError(f"archive {archive.name} cannot be read: {error}") from None


def site_packages(archive: Path) -> str | None:
    """lib/python3.X/site-packages if the archive is a packed virtualenv (its root the venv's), else None.
    ApplicationFileError if it is one for another Python than this one, or one that carries pyspark."""
    if not archive.is_file():
        raise ApplicationFileError(f"archive {archive}: no such file in the image")
    names = _names(archive)
    found = {match.groups() for name in names if (match := _SITE_PACKAGES.match(name))}
    if not found:
        return None
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    site, major, minor = sorted(found)[0]
    if f"{major}.{minor}" != running:
        raise ApplicationFileError(
            f"archive {archive.name} is a virtualenv for Python {major}.{minor}; the image runs Python "
            f"{running}: pack it with the image's Python"
        )
    if any(re.match(rf"^(?:\./)?{re.escape(site)}/pyspark/", name) for name in names):
        raise ApplicationFileError(
            f"archive {archive.name} is a virtualenv with pyspark in it: leave pyspark out (the image's "
            "Spark is the job's Spark)"
        )
    return site


def unpack(archive: Path, site: str, target: Path) -> Path:
    """The archive's site-packages, and nothing else of it, unpacked under target; the directory it is in."""

    def wanted(name: str) -> bool:
        return name.removeprefix("./").startswith(f"{site}/")

    target.mkdir(parents=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as opened:  # zipfile keeps every member under target
            opened.extractall(target, [name for name in opened.namelist() if wanted(name)])
    else:
        with tarfile.open(archive) as tar:
            members = [member for member in tar.getmembers() if wanted(member.name)]
            try:
                tar.extractall(target, members, filter="data")  # nothing outside target, no device files
            except tarfile.FilterError as error:
                raise ApplicationFileError(f"archive {archive.name}: {error}") from None
    return target / site
