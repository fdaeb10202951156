"""Every job whose image has ftspark's jar writes its checkpoint files through the jar's FileContext binding
(docs/local-recovery.md, "Fewer requests per checkpoint file"); a job without it gets Hadoop's own."""

from __future__ import annotations

from pathlib import Path

from ftspark.manifests import LOCAL_RECOVERY_AFS, LOCAL_RECOVERY_AFS_KEY
from ftspark.protocol import DriverEnv
from ftspark.runtime.session import local_recovery_jar, spark_settings


def test_the_jar_is_the_one_local_recovery_names_else_the_images(tmp_path: Path) -> None:
    image_jar = tmp_path / "ftspark-local-recovery.jar"
    named: dict[str, str] = {DriverEnv.LOCAL_RECOVERY_JAR: "/named.jar"}
    assert local_recovery_jar({}, image_jar) == "", "an image without it"
    assert local_recovery_jar(named, image_jar) == "/named.jar"
    image_jar.write_bytes(b"jar")
    assert local_recovery_jar({}, image_jar) == str(image_jar)
    assert local_recovery_jar(named, image_jar) == "/named.jar"


def test_with_the_jar_the_checkpoint_files_go_through_its_binding_unless_the_job_names_another() -> None:
    env: dict[str, str] = {DriverEnv.LOCAL_RECOVERY_JAR: "/opt/jars/ftspark-local-recovery.jar"}
    settings = spark_settings({}, "s3://b/c", Path("/jars"), env)
    assert settings[LOCAL_RECOVERY_AFS_KEY] == LOCAL_RECOVERY_AFS
    for side in ("driver", "executor"):
        assert settings[f"spark.{side}.extraClassPath"].endswith(":/opt/jars/ftspark-local-recovery.jar")
    own = {LOCAL_RECOVERY_AFS_KEY: "org.apache.hadoop.fs.s3a.S3A"}
    assert (
        spark_settings(own, "s3://b/c", Path("/jars"), env)[LOCAL_RECOVERY_AFS_KEY]
        == own[LOCAL_RECOVERY_AFS_KEY]
    )
