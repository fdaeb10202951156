"""Image → local entrypoint. The image names in pod specs are placeholders; this table says what runs instead.

| image pattern        | what the "image" provides                          | entrypoint                  |
|----------------------|----------------------------------------------------|-----------------------------|
| `ftspark/spark-py:*` | SPARK_HOME = the venv's pyspark, JAVA_HOME,        | the real image's:           |
| `ftspark/ftspark:*`  | PYSPARK_PYTHON = the venv's python, PYTHONPATH =   | ftspark.runtime.entrypoint  |
|                      | the repo's operator/ (`ftspark` imports), PATH     |                             |
|                      | with the venv's bin first, the machine's           |                             |
|                      | JDK_JAVA_OPTIONS                                   |                             |
| `python:*`           | PATH with the venv's bin first, PYTHONPATH as above | command + args             |
| anything else        | the usual PATH                                     | command + args, or /bin/sh  |

The Spark images run the same entrypoint function as the real image (images/spark-py/Dockerfile), Spark's
entrypoint.sh contract: args `executor` become the executor JVM, `driver …` spark-submit in client mode,
anything else runs as given. In every image a leading `python`/`python3` is the venv's interpreter, as the
real image's python is the one with pyspark and ftspark installed.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ftspark.runtime.entrypoint import spark_argv
from ftspark_dev.cluster.processes import REPO_ROOT

VENV_PYTHON = Path(sys.executable)
_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_VENV_PATH = f"{VENV_PYTHON.parent}:{_BASE_PATH}"
# Read by the `java` launcher; the test suite sets it (ftspark_dev.pytest_plugins.jvm).
JVM_OPTIONS = "JDK_JAVA_OPTIONS"


def spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed in this interpreter")
    return Path(spec.origin).parent


def java_home() -> Path:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("no java on PATH: the Spark image needs a JDK")
    return Path(java).resolve().parents[1]


Entrypoint = Callable[[Sequence[str], Sequence[str], Mapping[str, str], str], list[str]]


@dataclass(frozen=True)
class Image:
    patterns: tuple[str, ...]
    env: Callable[[], dict[str, str]]
    entrypoint: Entrypoint


def _python_first(argv: Sequence[str]) -> list[str]:
    if argv and argv[0] in {"python", "python3", f"python3.{sys.version_info.minor}"}:
        return [str(VENV_PYTHON), *argv[1:]]
    return list(argv)


def _command_or_shell(
    command: Sequence[str], args: Sequence[str], env: Mapping[str, str], cwd: str
) -> list[str]:
    return _python_first([*command, *args]) or ["/bin/sh"]


def _spark_entrypoint(
    command: Sequence[str], args: Sequence[str], env: Mapping[str, str], cwd: str
) -> list[str]:
    if command:  # a pod's command replaces the image's ENTRYPOINT
        return _python_first([*command, *args])
    return _python_first(spark_argv(args, env, cwd))


def _spark_env() -> dict[str, str]:
    env = {
        "PATH": _VENV_PATH,
        "SPARK_HOME": str(spark_home()),
        "JAVA_HOME": str(java_home()),
        "PYSPARK_PYTHON": str(VENV_PYTHON),
        "PYTHONPATH": str(REPO_ROOT / "operator"),
    }
    if JVM_OPTIONS in os.environ:  # the machine's JDK options are the "image"'s JDK's
        env[JVM_OPTIONS] = os.environ[JVM_OPTIONS]
    return env


IMAGES: tuple[Image, ...] = (
    Image(("ftspark/spark-py:*", "ftspark/ftspark:*"), _spark_env, _spark_entrypoint),
    Image(
        ("python:*",),
        lambda: {"PATH": _VENV_PATH, "PYTHONPATH": str(REPO_ROOT / "operator")},
        _command_or_shell,
    ),
    Image(("*",), lambda: {"PATH": _BASE_PATH}, _command_or_shell),
)


def image_for(name: str) -> Image:
    for image in IMAGES:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in image.patterns):
            return image
    raise AssertionError("the last pattern matches every image")


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known variables are replaced, unknown ones kept, $$ escapes a $."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REFERENCE.sub(substitute, value)


def container_argv(
    image_name: str, command: Sequence[str], args: Sequence[str], env: Mapping[str, str], cwd: str
) -> list[str]:
    """What a container of image_name started in cwd runs here, after $(VAR) expansion of command and args."""
    image = image_for(image_name)
    expanded_command = [expand(part, env) for part in command]
    expanded_args = [expand(part, env) for part in args]
    return image.entrypoint(expanded_command, expanded_args, env, cwd)


def image_env(image_name: str) -> dict[str, str]:
    """The environment baked into the "image", under the pod's own variables."""
    return {"HOME": os.environ.get("HOME", "/root"), **image_for(image_name).env()}
