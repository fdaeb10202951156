"""The driver runtime finds the S3A jars: as set, in the Spark image, or in the development cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspark.protocol import PROTOCOL_VERSION
from ftspark.runtime.config import (
    DEV_JARS_DIR_NAME,
    IMAGE_JARS_DIR,
    RuntimeConfig,
    missing_s3a_jars,
    s3a_in_spark_jars,
    s3a_jars_dir,
)


@pytest.fixture
def image_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "image" / "jars" / "s3a"
    directory.mkdir(parents=True)
    return directory


def test_the_variable_wins(image_dir: Path) -> None:
    assert s3a_jars_dir({"FTSPARK_SPARK_JARS_DIR": "/elsewhere"}, image_dir) == Path("/elsewhere")


def test_the_images_directory_when_there_is_one(image_dir: Path) -> None:
    assert s3a_jars_dir({"FTSPARK_SPARK_JARS_DIR": ""}, image_dir) == image_dir


def test_the_development_cache_outside_the_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    absent = tmp_path / "no-image"
    assert s3a_jars_dir({}, absent) == tmp_path / "home" / ".cache" / "ftspark" / "jars" / DEV_JARS_DIR_NAME
    assert s3a_jars_dir({"FTSPARK_CACHE": "/cache"}, absent) == Path("/cache/jars") / DEV_JARS_DIR_NAME


def test_runtime_config_uses_it() -> None:
    env = {
        "FTSPARK_PROTOCOL": str(PROTOCOL_VERSION),
        "FTSPARK_JOB": "ns/job",
        "FTSPARK_POD_NAME": "job-1",
        "FTSPARK_CHECKPOINT_LOCATION": "s3://b/c/d",
        "FTSPARK_TERM_FLOOR": "ftspark-system/ftspark-operator-term",
        "FTSPARK_CHECKPOINT_KEY_FILE": "/etc/ftspark/checkpoint-key/checkpoint-key",
    }
    assert RuntimeConfig.from_env({**env, "FTSPARK_SPARK_JARS_DIR": "/j"}).jars_dir == Path("/j")
    assert RuntimeConfig.from_env(env).jars_dir == s3a_jars_dir(env, IMAGE_JARS_DIR)


def test_s3a_in_sparks_own_jars_is_enough_and_a_missing_one_is_said_in_full(tmp_path: Path) -> None:
    """A user's own Spark image may carry S3A among Spark's jars (its classpath); one with it nowhere gets a
    message naming both places and the jars for the Hadoop its Spark bundles."""
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "hadoop-client-api-3.9.1.jar").touch()
    assert not s3a_in_spark_jars(home)
    said = missing_s3a_jars(tmp_path / "s3a", home)
    for named in (str(tmp_path / "s3a"), str(IMAGE_JARS_DIR), f"{home}/jars", "hadoop-aws-3.9.1.jar"):
        assert named in said, (named, said)
    (home / "jars" / "hadoop-aws-3.9.1.jar").touch()
    assert s3a_in_spark_jars(home)
