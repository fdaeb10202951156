"""What a job ships with it (spec.deps): the kinds of dependency, the Spark setting each goes in, and the
names each accepts. The operator checks every entry when the spec is admitted, the driver runtime again
where it fetches them (runtime/appfiles.py): one rule, two places that apply it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

_S3_OBJECT = re.compile(r"^s3a?://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^#]*[^/#]$")
_ALIAS = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class DepKind:
    field: str  # spec.deps.<field>
    conf_key: str  # the Spark setting its entries go in, as with spark-submit
    noun: str  # one entry, in messages
    suffixes: tuple[str, ...]  # the names Spark takes for it; () for any
    alias: bool = False  # `#name` allowed: the directory an archive is unpacked into


PY_FILES = DepKind("pyFiles", "spark.submit.pyFiles", "pyFile", (".py", ".zip", ".egg"))
FILES = DepKind("files", "spark.files", "file", ())
JARS = DepKind("jars", "spark.jars", "jar", (".jar",))
# The formats Spark's executors unpack (Utils.unpack), and the driver runtime too.
ARCHIVES = DepKind("archives", "spark.archives", "archive", (".zip", ".jar", ".tar.gz", ".tgz", ".tar"), True)
DEP_KINDS = (PY_FILES, FILES, JARS, ARCHIVES)


def split_alias(entry: str) -> tuple[str, str | None]:
    """(location, alias) of `location#alias`; alias None without a `#`."""
    location, hashed, alias = entry.partition("#")
    return location, alias if hashed else None


def unpacked_name(entry: str) -> str:
    """The directory an archive is unpacked into, in an executor's working directory: its alias, else its
    file name (Spark's rule)."""
    location, alias = split_alias(entry)
    return alias or PurePosixPath(location).name


def check(kind: DepKind, entry: str) -> str:
    """ValueError unless entry names one object on S3 (s3://, s3a://) or one file in the image (local://
    or an absolute path) with a name Spark takes for the kind."""
    location, alias = split_alias(entry)
    if alias is not None and not kind.alias:
        raise ValueError(f"{entry!r}: only archives take a #name")
    if alias is not None and (not _ALIAS.fullmatch(alias) or alias in {".", ".."}):
        raise ValueError(f"{entry!r}: #{alias} is not a directory name")
    path = location.removeprefix("local://")
    if location.startswith(("s3://", "s3a://")):
        if not _S3_OBJECT.fullmatch(location):
            raise ValueError(f"{entry!r}: not an S3 object URI (s3://<bucket>/<key>)")
    elif not path.startswith("/") or path.endswith("/") or "/../" in f"{path}/":
        raise ValueError(f"{entry!r}: neither an S3 object (s3://) nor a file in the image (local:///path)")
    if kind.suffixes and not location.lower().endswith(kind.suffixes):
        article = "an" if kind.noun[0] in "aeiou" else "a"
        raise ValueError(f"{entry!r}: {article} {kind.noun} must be a {'/'.join(kind.suffixes)} file")
    return entry
