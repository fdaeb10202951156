package io.ftspark.localrecovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.hadoop.fs.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class StateFilesTest {
  @ParameterizedTest
  @CsvSource({
    "s3a://b/ck/state/0/1/5.zip, true",
    "s3a://b/ck/state/0/1/5_0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.zip, true",
    "s3a://b/ck/state/0/1/SSTs/000012-0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.sst, true",
    "s3a://b/ck/state/0/1/logs/000013-0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.log, true",
    "s3a://b/ck/state/0/1/7.changelog, true",
    "s3a://b/ck/state/0/1/7.delta, true",
    "s3a://b/ck/state/3/199/7.snapshot, true",
    "s3a://b/ck/state/0/1/left-keyToNumValues/7.delta, true",
    "s3a://b/ck/state/0/1/.7.zip.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.tmp, true",
    "s3a://b/ck/state/0/1/.7.zip.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.TID12.tmp, true",
    "s3a://b/ck/state/0/1/.7.zip.crc, false",
    "s3a://b/ck/state/0/1/metadata, false",
    "s3a://b/ck/state/0/_metadata/metadata, false",
    "s3a://b/ck/state/0/1/x.sst, false",
    "s3a://b/ck/state/0/1/x.log, false",
    "s3a://b/ck/state/op/1/7.delta, false",
    "s3a://b/ck/offsets/7, false",
    "s3a://b/ck/commits/7, false",
    "s3a://b/ck/sources/0/7.zip, false",
    "s3a://b/data/archive.zip, false",
    "/state/0/1/7.zip, true",
  })
  void tracksOnlyImmutableStateFiles(String path, boolean tracked) {
    assertEquals(tracked, StateFiles.isTracked(new Path(path)), path);
  }

  @ParameterizedTest
  @CsvSource({
    "s3a://b/ck/offsets/..7.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.tmp.crc, true",
    "s3a://b/ck/state/0/1/..7.delta.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.TID12.tmp.crc, true",
    "s3a://b/ck/offsets/.7.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.tmp, false",
    "s3a://b/ck/offsets/.7.crc, false",
    "s3a://b/ck/offsets/..7.tmp.crc, false",
    "s3a://b/ck/offsets/7.crc, false",
    "s3a://b/ck/offsets/.crc, false",
  })
  void knowsTheChecksumSidecarOfASparkTemporaryFile(String path, boolean sidecar) {
    assertEquals(sidecar, StateFiles.isChecksumOfSparkTemp(new Path(path)), path);
  }
}
