"""How Spark's checkpoint files reach S3 through the wrapper's FileContext binding: the same semantics as
FileContext's own (a temporary file renamed into place; an existing file refused, or replaced when asked),
in one request each. A real JVM (pyspark's gateway), real S3A, requests counted at the S3 server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ftspark.manifests import LOCAL_RECOVERY_AFS, local_recovery_conf
from ftspark.runtime.classdata import extra_classpath
from ftspark_dev.cluster.s3server import S3Server, spark_s3a_conf

# Run in a child: a gateway JVM of its own, as every Spark driver has. For each binding of FileContext it
# writes one file as Spark's CheckpointFileManager does (create a temporary name, rename it into place),
# then renames another temporary file onto it without and with overwrite; it prints what it saw.
CHILD = r"""
import json, sys
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

settings, root = json.loads(sys.argv[1]), sys.argv[2]
gateway = launch_gateway(SparkConf().setAll(list(settings.items())))
jvm = gateway.jvm
fs_pkg = jvm.org.apache.hadoop.fs
CREATE = jvm.java.util.EnumSet.of(fs_pkg.CreateFlag.CREATE, fs_pkg.CreateFlag.OVERWRITE)
Rename = fs_pkg.Options.Rename
no_opts = gateway.new_array(fs_pkg.Options.CreateOpts, 0)


def context(binding, extra):
    conf = jvm.org.apache.hadoop.conf.Configuration()
    for key, value in settings.items():
        if key.startswith("spark.hadoop."):
            conf.set(key.removeprefix("spark.hadoop."), value)
    conf.set("fs.AbstractFileSystem.s3a.impl", binding)
    for key, value in extra.items():
        conf.set(key, value)
    return fs_pkg.FileContext.getFileContext(jvm.java.net.URI(root), conf)


def write(fc, path, data):
    out = fc.create(fs_pkg.Path(path), CREATE, no_opts)
    out.write(bytearray(data.encode()))
    out.close()


def read(fc, path):
    stream = fc.open(fs_pkg.Path(path))
    data = bytes(stream.readAllBytes())
    stream.close()
    return data.decode()


def rename(fc, src, dst, mode):
    options = gateway.new_array(Rename, 1)
    options[0] = mode
    try:
        fc.rename(fs_pkg.Path(src), fs_pkg.Path(dst), options)
        return "renamed"
    except Exception as error:  # py4j's Py4JJavaError: the Java exception's class
        return error.java_exception.getClass().getName()


def mark(fc, name):  # a request the server logs between the measured ones: a probe of a missing path
    fc.util().exists(fs_pkg.Path(f"{root}/{name}"))


# Spark's temporary names: .<final name>.<UUID>.tmp
FIRST_TEMP = ".1.00000000-0000-0000-0000-00000000000a.tmp"
AGAIN_TEMP = ".1.00000000-0000-0000-0000-00000000000b.tmp"
CANCELLED_TEMP = ".2.00000000-0000-0000-0000-00000000000c.tmp"
report = {}
for name, (binding, extra) in json.loads(sys.argv[3]).items():
    fc, base = context(binding, extra), f"{root}/{name}"
    fc.mkdir(fs_pkg.Path(base), fs_pkg.permission.FsPermission.getDirDefault(), True)  # as Spark does first
    mark(fc, f"mark-{name}-begin")
    write(fc, f"{base}/{FIRST_TEMP}", "first")
    first = rename(fc, f"{base}/{FIRST_TEMP}", f"{base}/1", Rename.NONE)
    fc.util().exists(fs_pkg.Path(f"{base}/.{FIRST_TEMP}.crc"))  # Spark's probe for a checksum sidecar, next
    mark(fc, f"mark-{name}-end")
    write(fc, f"{base}/{AGAIN_TEMP}", "second")
    refused = rename(fc, f"{base}/{AGAIN_TEMP}", f"{base}/1", Rename.NONE)
    mark(fc, f"mark-{name}-refused")
    write(fc, f"{base}/{CANCELLED_TEMP}", "third")  # Spark's cancel: the temporary file deleted, not renamed
    cancelled = [fc.util().exists(fs_pkg.Path(f"{base}/{CANCELLED_TEMP}"))]
    fc.delete(fs_pkg.Path(f"{base}/{CANCELLED_TEMP}"), False)
    mark(fc, f"mark-{name}-cancelled")
    cancelled.append(fc.util().exists(fs_pkg.Path(f"{base}/{CANCELLED_TEMP}")))
    after_refusal = read(fc, f"{base}/1")
    replaced = rename(fc, f"{base}/{AGAIN_TEMP}", f"{base}/1", Rename.OVERWRITE)
    report[name] = {
        "first": first, "refused": refused, "after_refusal": after_refusal, "replaced": replaced,
        "after_overwrite": read(fc, f"{base}/1"),
        "temporary_left": fc.util().exists(fs_pkg.Path(f"{base}/{AGAIN_TEMP}")),
        "cancelled_exists_before_after": cancelled,
    }
print("REPORT " + json.dumps(report), flush=True)
"""


def test_checkpoint_files_keep_filecontexts_semantics_in_one_request(
    s3_server: S3Server, bucket: str, s3a_jars: Path, local_recovery_jar: Path, tmp_path: Path
) -> None:
    classpath = extra_classpath(s3a_jars, str(local_recovery_jar))
    settings = {
        "spark.driver.extraClassPath": classpath,
        **spark_s3a_conf(s3_server.endpoint),
        **local_recovery_conf(None),
    }
    bindings = {
        "wrapper": (LOCAL_RECOVERY_AFS, {}),
        # For a store without conditional writes (S3A's own switch): S3A's probe, then the PUT.
        "unconditional": (LOCAL_RECOVERY_AFS, {"fs.s3a.create.conditional.enabled": "false"}),
        "s3a": ("org.apache.hadoop.fs.s3a.S3A", {}),  # Hadoop's own binding: FileContext's generic checks
    }
    offset = s3_server.access_log_offset()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(settings), f"s3a://{bucket}/ck", json.dumps(bindings)],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp_path), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp_path}"},
    )
    reports = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and reports, done.stdout + done.stderr[-3000:]
    report = json.loads(reports[0].removeprefix("REPORT "))
    for name in bindings:
        assert report[name] == {
            "first": "renamed",
            "refused": "org.apache.hadoop.fs.FileAlreadyExistsException",
            "after_refusal": "first",
            "replaced": "renamed",
            "after_overwrite": "second",
            "temporary_left": False,
            "cancelled_exists_before_after": [True, False],
        }, (name, report)

    # The requests of the first write (create, write, close, rename, Spark's checksum probe), of the refused
    # rename and of the cancel, counted at the server between the child's marks: the child made them one
    # after the other, so they reach the log in order.
    with s3_server.access_log.open("rb") as log:
        log.seek(offset)
        lines = log.read().decode().splitlines()
    written = {name: _between(lines, f"mark-{name}-begin", f"mark-{name}-end") for name in bindings}
    refusal = {name: _between(lines, f"mark-{name}-end", f"mark-{name}-refused") for name in bindings}
    cancel = {name: _between(lines, f"mark-{name}-refused", f"mark-{name}-cancelled") for name in bindings}
    print(f"\nrequests to write one checkpoint file: {written}\nto refuse: {refusal}\nto cancel: {cancel}")
    # Held locally, sent once at the rename, conditional on no object there (S3's answer 412 is the refusal).
    assert written["wrapper"] == [("s3_PutObject", "200")], written
    assert refusal["wrapper"] == [("s3_PutObject", "412")], refusal
    assert cancel["wrapper"] == [], cancel  # never sent, so neither looked up nor deleted at S3
    assert written["unconditional"] == [
        ("s3_HeadObject", "404"),
        ("s3_ListObjectsV2", "200"),
        ("s3_PutObject", "200"),
    ]
    assert refusal["unconditional"] == [("s3_HeadObject", "200")], refusal  # refused before any PUT
    assert len(written["s3a"]) >= 10, written  # what the wrapper spares: FileContext's and S3A's probes


def _between(lines: list[str], begin: str, end: str) -> list[tuple[str, str]]:
    """(operation, status) of each request logged between the two marks."""
    first = max(i for i, line in enumerate(lines) if begin in line)
    last = min(i for i, line in enumerate(lines) if end in line)
    return [(fields[7], fields[10]) for fields in (line.split(" ") for line in lines[first + 1 : last])]
