"""mainApplicationFile and pyFiles on S3: fetched through the S3 protocol from the loopback S3 server with
the job's Spark settings, and a missing or unreadable object ends the driver with a message naming it."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from ftspark.protocol import Exit
from ftspark.runtime.appfiles import Application, ApplicationFileError, fetch, places, py_files, s3_object
from ftspark.runtime.objects import ObjectStore, endpoint_url, s3_client
from ftspark_dev.cluster.s3server import ACCESS_KEY, SECRET_KEY, S3Server
from tests.runtime.conftest import RuntimeJob

SCRIPT = b"print('hello')\n"

# The script asks an executor's Python worker to import the module from the pyFile, then writes what it got.
BATCH_SCRIPT = b"""
import sys
from pathlib import Path
from pyspark.sql import SparkSession

import greeting

spark = SparkSession.builder.getOrCreate()
words = spark.sparkContext.parallelize(["a", "b"], 2).map(lambda word: greeting.shout(word)).collect()
Path(sys.argv[2], "words.txt").write_text(",".join(words))
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
    assert places("s3://b/apps/job.py", ["s3a://b/lib/job.py", "local:///opt/x.zip", "s3://b/deps.egg"]) == {
        "s3://b/apps/job.py": PurePosixPath("main/job.py"),
        "s3a://b/lib/job.py": PurePosixPath("py-files/job.py"),
        "s3://b/deps.egg": PurePosixPath("py-files/deps.egg"),
    }
    assert places("local:///opt/app/job.py", ["/opt/lib.zip"]) == {}
    assert _refusal(places, "s3://b/job.zip", []) == "mainApplicationFile s3://b/job.zip: must be a .py file"
    assert (
        _refusal(places, "/app/job.py", ["s3://b/lib.tar"])
        == "pyFile s3://b/lib.tar: must be a .py/.zip/.egg file"
    )
    assert (
        _refusal(places, "/app/job.py", ["s3://b/one/lib.zip", "s3://c/lib.zip"])
        == "pyFiles s3://b/one/lib.zip and s3://c/lib.zip have the same file name"
    )


def test_spark_gets_the_local_copies_of_the_py_files() -> None:
    conf = {"spark.master": "local[2]", "spark.submit.pyFiles": "s3://b/lib.zip, local:///opt/x.py"}
    assert py_files(conf) == ["s3://b/lib.zip", "local:///opt/x.py"]
    assert py_files({}) == []
    app = Application("/tmp/app/main/job.py", ("/tmp/app/py-files/lib.zip", "local:///opt/x.py"))
    assert app.spark_conf(conf) == {
        "spark.master": "local[2]",
        "spark.submit.pyFiles": "/tmp/app/py-files/lib.zip,local:///opt/x.py",
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
        [f"s3a://{bucket}/libs/greeting.zip", "local:///opt/lib.py", f"s3://{bucket}/libs/job.py"],
        tmp_path,
    )
    main, greeting, local, same_name = Path(app.main_file), *app.py_files
    assert main.read_bytes() == SCRIPT and main.name == "job.py"
    assert Path(greeting).read_bytes() == GREETING_ZIP and Path(greeting).name == "greeting.zip"
    assert local == "local:///opt/lib.py"
    assert Path(same_name).name == "job.py" and Path(same_name).read_bytes() != SCRIPT
    folder = main.parent.parent
    assert folder.parent == tmp_path and folder.stat().st_mode & 0o777 == 0o700


def test_local_files_are_used_where_they_are(objects: ObjectStore, tmp_path: Path) -> None:
    app = fetch(objects, "local:///opt/app/job.py", ["/opt/lib.zip"], tmp_path)
    assert app == Application("/opt/app/job.py", ("/opt/lib.zip",))
    assert not any(tmp_path.iterdir())


def test_a_missing_or_unreadable_object_is_named_with_the_reason(
    objects: ObjectStore, bucket: str, tmp_path: Path
) -> None:
    missing = f"s3://{bucket}/apps/absent.py"
    assert _refusal(fetch, objects, missing, [], tmp_path) == f"{missing}: no such object"

    elsewhere = f"s3://{bucket}-absent/libs/lib.zip"
    # The server's own words follow its error code in brackets.
    assert _refusal(fetch, objects, "/opt/job.py", [elsewhere], tmp_path).startswith(
        f"cannot read {elsewhere}: S3 answered NoSuchBucket ("
    )

    empty = f"s3://{bucket}/apps/empty.py"
    objects.write(empty, b"")
    assert _refusal(fetch, objects, empty, [], tmp_path) == f"{empty}: the object is empty"
    assert not list(tmp_path.glob("ftspark-app-*")), "a refused fetch leaves no folder behind"


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
    refusal = _refusal(fetch, ObjectStore(s3_client(conf)), uri, [], tmp_path)
    assert refusal == f"cannot read {uri}: Unable to locate credentials"

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    assert Path(fetch(ObjectStore(s3_client(conf)), uri, [], tmp_path).main_file).read_bytes() == SCRIPT


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
    job.script = f"s3://{bucket}/apps/batch.py"
    conf = {**job.spark_conf(), "spark.submit.pyFiles": f"s3://{bucket}/libs/greeting.zip"}
    job.env["FTSPARK_SPARK_CONF"] = json.dumps(conf)
    job.env["TMPDIR"] = str(job.work)  # where the runtime makes its folder for the fetched files
    job.start()
    assert job.wait(180) == Exit.FINISHED, job.log()
    assert job.termination()["reason"] == "Finished"
    assert (job.output.folder / "words.txt").read_text() == "A!,B!"  # greeting.py ran on the executors
    [fetched] = job.work.glob("ftspark-app-*/main/batch.py")
    assert fetched.read_bytes() == BATCH_SCRIPT
