"""mainApplicationFile and spec.deps on S3: fetched through the S3 protocol from the loopback S3 server with
the job's Spark settings, a packed virtualenv unpacked for the driver, and a missing, unreadable, too large or
unusable object ends the driver with a message naming it."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from ftspark.domain.deps import ARCHIVES, FILES, JARS, PY_FILES
from ftspark.protocol import Exit
from ftspark.runtime.appfiles import (
    Application,
    ApplicationFileError,
    fetch,
    places,
    s3_object,
    shipped,
    site_packages,
)
from ftspark.runtime.objects import ObjectStore, endpoint_url, s3_client
from ftspark_dev.cluster.s3server import ACCESS_KEY, SECRET_KEY, S3Server
from ftspark_dev.subjects.shipped_venv import PYTHON, venv_archive
from tests.runtime.conftest import RuntimeJob

SCRIPT = b"print('hello')\n"

# The script asks an executor's Python worker to import the module from the pyFile, then writes what it got;
# and imports a package that only the shipped virtualenv has, on the driver.
BATCH_SCRIPT = b"""
import sys
from pathlib import Path
from pyspark.sql import SparkSession

import greeting
import shipped_only

spark = SparkSession.builder.getOrCreate()
words = spark.sparkContext.parallelize(["a", "b"], 2).map(lambda word: greeting.shout(word)).collect()
Path(sys.argv[2], "words.txt").write_text(",".join(words) + shipped_only.MARK)
"""


def _zip(name: str, source: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, source)
    return buffer.getvalue()


GREETING_ZIP = _zip("greeting.py", "def shout(word):\n    return word.upper() + '!'\n")


def _refusal(function: Callable[..., object], *args: object) -> str:
    with pytest.raises(ApplicationFileError) as caught:
        function(*args)
    return str(caught.value)


def test_s3_uris_name_an_object_and_everything_else_is_local() -> None:
    assert s3_object("s3://bucket/apps/job.py") == ("bucket", "apps/job.py")
    assert s3_object("s3a://bucket/job.py") == ("bucket", "job.py")
    assert s3_object("local:///opt/app/job.py") is None
    assert s3_object("/opt/app/job.py") is None
    for uri in ("s3://bucket", "s3://bucket/", "s3:///job.py", "s3a://bucket/apps/"):
        assert _refusal(s3_object, uri) == f"{uri}: not an S3 object URI (s3://<bucket>/<key>)"


def test_names_are_checked_before_anything_is_read() -> None:
    wanted = {
        PY_FILES: ["s3a://bkt/lib/job.py", "local:///opt/x.zip", "s3://bkt/deps.egg"],
        FILES: ["s3://bkt/conf/lookup.csv"],
        JARS: ["s3://bkt/jars/udf.jar"],
        ARCHIVES: ["s3://bkt/envs/env.tar.gz#environment"],
    }
    assert places("s3://bkt/apps/job.py", wanted) == {
        "s3://bkt/apps/job.py": PurePosixPath("mainApplicationFile/job.py"),
        "s3a://bkt/lib/job.py": PurePosixPath("pyFiles/job.py"),
        "s3://bkt/deps.egg": PurePosixPath("pyFiles/deps.egg"),
        "s3://bkt/conf/lookup.csv": PurePosixPath("files/lookup.csv"),
        "s3://bkt/jars/udf.jar": PurePosixPath("jars/udf.jar"),
        "s3://bkt/envs/env.tar.gz": PurePosixPath("archives/env.tar.gz"),
    }
    assert places("local:///opt/app/job.py", {PY_FILES: ["/opt/lib.zip"]}) == {}
    refused = [
        ("s3://bkt/job.zip", PY_FILES, [], "mainApplicationFile 's3://bkt/job.zip': a mainApplicationFile "),
        (
            "/app/job.py",
            PY_FILES,
            ["s3://bkt/lib.tar"],
            "pyFiles 's3://bkt/lib.tar': a pyFile must be a .py/",
        ),
        ("/app/job.py", JARS, ["s3://bkt/udf.zip"], "jars 's3://bkt/udf.zip': a jar must be a .jar file"),
        ("/app/job.py", ARCHIVES, ["s3://bkt/env.rar"], "archives 's3://bkt/env.rar': an archive must be a "),
        ("/app/job.py", FILES, ["s3://bkt/a.csv#b"], "files 's3://bkt/a.csv#b': only archives take a #name"),
        (
            "/app/job.py",
            PY_FILES,
            ["s3://bkt/one/lib.zip", "s3://cat/lib.zip"],
            "pyFiles s3://bkt/one/lib.zip and s3://cat/lib.zip have the same file name",
        ),
    ]
    for main, kind, entries, message in refused:
        assert _refusal(places, main, {kind: entries}).startswith(message)


def test_spark_gets_the_local_copies_and_the_executors_the_virtualenvs() -> None:
    conf = {
        "spark.master": "local[2]",
        "spark.submit.pyFiles": "s3://b/lib.zip, local:///opt/x.py",
        "spark.archives": "s3://b/env.tar.gz#environment",
        "spark.executorEnv.PYTHONPATH": "/opt/theirs",
    }
    assert shipped(conf) == {
        PY_FILES: ["s3://b/lib.zip", "local:///opt/x.py"],
        FILES: [],
        JARS: [],
        ARCHIVES: ["s3://b/env.tar.gz#environment"],
    }
    app = Application(
        "/tmp/app/main/job.py",
        {
            "spark.submit.pyFiles": ("/tmp/app/pyFiles/lib.zip", "/opt/x.py"),
            "spark.archives": ("/tmp/app/archives/env.tar.gz#environment",),
        },
        ("/tmp/app/venvs/environment/lib/python3.11/site-packages",),
        ("./environment/lib/python3.11/site-packages",),
    )
    assert app.spark_conf(conf) == {
        "spark.master": "local[2]",
        "spark.submit.pyFiles": "/tmp/app/pyFiles/lib.zip,/opt/x.py",
        "spark.archives": "/tmp/app/archives/env.tar.gz#environment",
        # Ours first: the venv's packages are what the job shipped for its UDFs.
        "spark.executorEnv.PYTHONPATH": "./environment/lib/python3.11/site-packages:/opt/theirs",
    }
    assert Application("/opt/job.py").spark_conf({"a": "b"}) == {"a": "b"}


def test_endpoints_are_read_as_s3a_reads_them() -> None:
    assert endpoint_url("http://minio:9000", None) == "http://minio:9000"
    assert endpoint_url("minio:9000", "false") == "http://minio:9000"
    assert endpoint_url("s3.eu-west-1.amazonaws.com", None) == "https://s3.eu-west-1.amazonaws.com"
    assert endpoint_url(None, "false") is None


@pytest.fixture
def objects(s3_server: S3Server) -> ObjectStore:
    """Built as the driver builds it: from the job's spark.hadoop.fs.s3a.* settings."""
    return ObjectStore(s3_client(s3_server.spark_conf()))


def test_main_file_and_py_files_are_fetched_into_a_private_folder(
    objects: ObjectStore, bucket: str, tmp_path: Path
) -> None:
    objects.write(f"s3://{bucket}/apps/job.py", SCRIPT)
    objects.write(f"s3://{bucket}/libs/greeting.zip", GREETING_ZIP)
    objects.write(f"s3://{bucket}/libs/job.py", b"NAME = 'a pyFile named like the main file'\n")
    app = fetch(
        objects,
        f"s3://{bucket}/apps/job.py",
        {
            PY_FILES: [
                f"s3a://{bucket}/libs/greeting.zip",
                "local:///opt/lib.py",
                f"s3://{bucket}/libs/job.py",
            ]
        },
        tmp_path,
    )
    main, (greeting, local, same_name) = Path(app.main_file), app.entries["spark.submit.pyFiles"]
    assert main.read_bytes() == SCRIPT and main.name == "job.py"
    assert Path(greeting).read_bytes() == GREETING_ZIP and Path(greeting).name == "greeting.zip"
    assert local == "/opt/lib.py"
    assert Path(same_name).name == "job.py" and Path(same_name).read_bytes() != SCRIPT
    folder = main.parent.parent
    assert folder.parent == tmp_path and folder.stat().st_mode & 0o777 == 0o700


def test_local_files_are_used_where_they_are(objects: ObjectStore, tmp_path: Path) -> None:
    app = fetch(objects, "local:///opt/app/job.py", {PY_FILES: ["/opt/lib.zip"]}, tmp_path)
    assert app == Application("/opt/app/job.py", {"spark.submit.pyFiles": ("/opt/lib.zip",)})
    assert not any(tmp_path.iterdir())


def test_a_missing_or_unreadable_object_is_named_with_the_reason(
    objects: ObjectStore, bucket: str, tmp_path: Path
) -> None:
    missing = f"s3://{bucket}/apps/absent.py"
    assert _refusal(fetch, objects, missing, {}, tmp_path) == f"{missing}: no such object"

    elsewhere = f"s3://{bucket}-absent/libs/lib.zip"
    # The server's own words follow its error code in brackets.
    assert _refusal(fetch, objects, "/opt/job.py", {PY_FILES: [elsewhere]}, tmp_path).startswith(
        f"cannot read {elsewhere}: S3 answered NoSuchBucket ("
    )

    empty = f"s3://{bucket}/apps/empty.py"
    objects.write(empty, b"")
    assert _refusal(fetch, objects, empty, {}, tmp_path) == f"{empty}: the object is empty"

    jar = f"s3://{bucket}/jars/big.jar"
    objects.write(jar, b"x" * 2048)
    refusal = _refusal(fetch, objects, "/opt/job.py", {JARS: [jar]}, tmp_path, 2047)
    assert refusal == f"{jar}: 2048 bytes, more than 2047 (spec.deps.maxFileMiB)"
    assert not list(tmp_path.glob("ftspark-app-*")), "a refused fetch leaves no folder behind"
    [fetched] = fetch(objects, "/opt/job.py", {JARS: [jar]}, tmp_path, 2048).entries["spark.jars"]
    assert Path(fetched).stat().st_size == 2048


def test_a_virtualenv_archive_is_unpacked_for_the_driver_and_named_to_the_executors(
    objects: ObjectStore, bucket: str, tmp_path: Path
) -> None:
    """Only its site-packages, nothing outside the folder; the executors find it where Spark unpacks it."""
    uri = f"s3://{bucket}/envs/env.tar.gz"
    objects.write(uri, venv_archive())
    app = fetch(objects, "/opt/job.py", {ARCHIVES: [f"{uri}#environment"]}, tmp_path)
    [site] = app.python_paths
    assert Path(site, "shipped_only", "__init__.py").read_bytes() == b"MARK = '+venv'\n"
    assert not Path(site).parents[2].joinpath("bin").exists(), "the link to the interpreter is not unpacked"
    assert app.executor_python_paths == (f"./environment/lib/{PYTHON}/site-packages",)
    assert app.entries["spark.archives"][0].endswith("/archives/env.tar.gz#environment")


def test_a_virtualenv_the_driver_cannot_use_is_refused_saying_why(tmp_path: Path) -> None:
    def refusal(archive: bytes) -> str:
        path = tmp_path / "env.tar.gz"
        path.write_bytes(archive)
        return _refusal(site_packages, path)

    other = "python3.99"
    assert refusal(venv_archive(other)) == (
        f"archive env.tar.gz is a virtualenv for Python 3.99; the image runs Python {PYTHON[6:]}: pack it "
        "with the image's Python"
    )
    with_pyspark = venv_archive(extra={f"lib/{PYTHON}/site-packages/pyspark/__init__.py": b""})
    assert "with pyspark in it" in refusal(with_pyspark)
    (tmp_path / "broken.tar.gz").write_bytes(b"not an archive")
    assert "archive broken.tar.gz cannot be read" in _refusal(site_packages, tmp_path / "broken.tar.gz")
    (tmp_path / "plain.zip").write_bytes(GREETING_ZIP)
    assert site_packages(tmp_path / "plain.zip") is None, "an archive that is no venv is Spark's alone"


def test_a_virtualenv_reaching_out_of_its_folder_is_refused(
    objects: ObjectStore, bucket: str, tmp_path: Path
) -> None:
    """A member named to land outside the folder it is unpacked into (a tenant's archive is the tenant's,
    but the driver's disk is not a place to write anywhere on)."""
    uri = f"s3://{bucket}/envs/escape.tar.gz"
    escape = {f"lib/{PYTHON}/site-packages/../../../../outside.py": b"x = 1\n"}
    objects.write(uri, venv_archive(extra=escape))
    assert "outside.py" in _refusal(fetch, objects, "/opt/job.py", {ARCHIVES: [uri]}, tmp_path)
    assert not list(tmp_path.rglob("outside.py")) and not list(tmp_path.glob("ftspark-app-*"))


def test_aws_environment_credentials_serve_when_the_spark_conf_has_none(
    s3_server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in the examples: the endpoint in sparkConf, the keys in AWS_* variables from a Secret."""
    conf = {k: v for k, v in s3_server.spark_conf().items() if not k.endswith((".access.key", ".secret.key"))}
    uri = f"s3://{bucket}/apps/job.py"
    ObjectStore(s3_server.client()).write(uri, SCRIPT)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    refusal = _refusal(fetch, ObjectStore(s3_client(conf)), uri, {}, tmp_path)
    assert refusal == f"cannot read {uri}: Unable to locate credentials"

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    assert Path(fetch(ObjectStore(s3_client(conf)), uri, {}, tmp_path).main_file).read_bytes() == SCRIPT


def test_driver_names_a_missing_main_file_on_s3(make_job: Any, bucket: str) -> None:
    job: RuntimeJob = make_job()
    job.script = f"s3://{bucket}/apps/absent.py"
    job.start()
    assert job.wait(60) == Exit.BAD_INPUT
    message = job.termination()
    assert message["reason"] == "ApplicationFile"
    assert message["message"] == f"s3://{bucket}/apps/absent.py: no such object"


@pytest.mark.slow
def test_driver_runs_a_main_file_and_py_files_from_s3(make_job: Any, bucket: str) -> None:
    job: RuntimeJob = make_job()
    job.write(f"s3://{bucket}/apps/batch.py", BATCH_SCRIPT)
    job.write(f"s3://{bucket}/libs/greeting.zip", GREETING_ZIP)
    job.write(f"s3://{bucket}/envs/env.tar.gz", venv_archive())
    job.script = f"s3://{bucket}/apps/batch.py"
    conf = {
        **job.spark_conf(),
        "spark.submit.pyFiles": f"s3://{bucket}/libs/greeting.zip",
        "spark.archives": f"s3://{bucket}/envs/env.tar.gz#environment",
    }
    job.env["FTSPARK_SPARK_CONF"] = json.dumps(conf)
    job.env["TMPDIR"] = str(job.work)  # where the runtime makes its folder for the fetched files
    job.start()
    assert job.wait(180) == Exit.FINISHED, job.log()
    assert job.termination()["reason"] == "Finished"
    # greeting.py ran on the executors; the venv's package imported on the driver
    assert (job.output.folder / "words.txt").read_text() == "A!,B!+venv"
    [fetched] = job.work.glob("ftspark-app-*/mainApplicationFile/batch.py")
    assert fetched.read_bytes() == BATCH_SCRIPT
