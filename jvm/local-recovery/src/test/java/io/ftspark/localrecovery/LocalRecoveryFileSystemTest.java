package io.ftspark.localrecovery;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.attribute.FileTime;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The wrapper around the local filesystem as its "primary": file:// stands in for s3a://. */
class LocalRecoveryFileSystemTest {
  private static final byte[] KEY = content(32, 99);
  private static final byte[] OTHER_KEY = content(32, 98);

  @TempDir java.nio.file.Path tmp;
  private java.nio.file.Path localDir;
  private java.nio.file.Path keyFile;
  private Path partition;
  private LocalRecoveryFileSystem fs;
  private Map<String, Long> before;

  @BeforeEach
  void setUp() throws IOException {
    localDir = tmp.resolve("node-local");
    keyFile = writeKey("key", KEY);
    partition = new Path(tmp.resolve("primary/ckpt/state/0/1").toUri());
    fs = open(RawLocalFileSystem.class, localDir.toString());
    before = LocalRecoveryStats.snapshot();
  }

  @AfterEach
  void tearDown() throws IOException {
    fs.close();
  }

  private Configuration conf(Class<?> delegate, String dir) {
    Configuration conf = new Configuration(false);
    conf.set(LocalRecoveryFileSystem.DELEGATE_IMPL, delegate.getName());
    conf.set(LocalRecoveryFileSystem.DIR, dir);
    conf.set(LocalRecoveryFileSystem.KEY_FILE, keyFile.toString());
    return conf;
  }

  private LocalRecoveryFileSystem open(Class<?> delegate, String dir) throws IOException {
    return open(conf(delegate, dir));
  }

  private static LocalRecoveryFileSystem open(Configuration conf) throws IOException {
    LocalRecoveryFileSystem wrapper = new LocalRecoveryFileSystem();
    wrapper.initialize(URI.create("file:///"), conf);
    return wrapper;
  }

  private java.nio.file.Path writeKey(String name, byte[] key) throws IOException {
    return Files.write(tmp.resolve(name), key);
  }

  private long delta(String counter) {
    return LocalRecoveryStats.snapshot().get(counter) - before.get(counter);
  }

  private java.nio.file.Path primaryFile(Path path) {
    return java.nio.file.Path.of(path.toUri());
  }

  /** Writes bytes through the wrapper, then flips one bit of the local copy at offset; returns bytes. */
  private byte[] writeWithFlippedCopy(Path path, byte[] bytes, int offset) throws IOException {
    write(path, bytes);
    byte[] damaged = bytes.clone();
    damaged[offset] ^= 1;
    Files.write(localCopy(path), damaged);
    return bytes;
  }

  private java.nio.file.Path localCopy(Path path) {
    return localDir.resolve("file/_" + path.toUri().getPath());
  }

  private java.nio.file.Path record(Path path) {
    return localCopy(path).resolveSibling(localCopy(path).getFileName() + ".lrmeta");
  }

  /**
   * What an attacker who can write the local dir does: puts bytes as the copy of path and a record for them in
   * the wrapper's format, MACed with the given key (the primary's identity is taken from the current record).
   */
  private void forge(Path path, byte[] bytes, byte[] key) throws IOException, GeneralSecurityException {
    String identity = Files.readString(record(path), UTF_8).split(" ", 4)[3];
    byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(message)) {
      out.writeUTF("ftspark-local-recovery-v1");
      out.writeUTF(fs.makeQualified(path).toUri().toString());
      out.writeUTF(identity);
      out.writeLong(bytes.length);
      out.write(digest);
    }
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    HexFormat hex = HexFormat.of();
    String forged = hex.formatHex(mac.doFinal(message.toByteArray()));
    Files.write(localCopy(path), bytes);
    Files.writeString(record(path), bytes.length + " " + hex.formatHex(digest) + " " + forged + " " + identity);
  }

  private static byte[] content(int size, int seed) {
    byte[] bytes = new byte[size];
    for (int i = 0; i < size; i++) {
      bytes[i] = (byte) (i * 31 + seed);
    }
    return bytes;
  }

  private void write(Path path, byte[] bytes) throws IOException {
    try (FSDataOutputStream out = fs.create(path, true)) {
      out.write(bytes);
    }
  }

  private byte[] read(Path path) throws IOException {
    try (FSDataInputStream in = fs.open(path)) {
      return in.readAllBytes();
    }
  }

  @Test
  void writtenFileIsServedLocally() throws IOException {
    Path sst = new Path(partition, "SSTs/000001-a.sst");
    byte[] bytes = content(200_000, 1);
    write(sst, bytes);
    assertArrayEquals(bytes, Files.readAllBytes(localCopy(sst)));
    assertEquals(1, delta("localFilesWritten"));
    assertEquals(bytes.length, delta("localBytesWritten"));

    assertArrayEquals(bytes, read(sst));
    assertEquals(1, delta("localHits"));
    assertEquals(bytes.length, delta("bytesReadLocal"));
    assertEquals(0, delta("bytesReadPrimary"));
  }

  @Test
  void untrackedFilesGetNoCopy() throws IOException {
    Path offsets = new Path(partition.getParent().getParent().getParent(), "offsets/7");
    write(offsets, content(100, 2));
    assertArrayEquals(content(100, 2), read(offsets));
    assertFalse(Files.exists(localCopy(offsets)));
    assertEquals(0, delta("localFilesWritten") + delta("localMisses") + delta("localHits"));
  }

  @Test
  void missingCopyIsFetchedFromThePrimary() throws IOException {
    Path zip = new Path(partition, "3.zip");
    Files.createDirectories(primaryFile(zip).getParent());
    Files.write(primaryFile(zip), content(5000, 3));

    assertArrayEquals(content(5000, 3), read(zip));
    assertEquals(1, delta("localMisses"));
    assertEquals(5000, delta("bytesReadPrimary"));
    assertArrayEquals(content(5000, 3), read(zip));
    assertEquals(1, delta("localHits"));
    assertEquals(5000, delta("bytesReadPrimary"));
  }

  @Test
  void corruptCopyIsReplaced() throws IOException {
    Path changelog = new Path(partition, "4.changelog");
    byte[] bytes = writeWithFlippedCopy(changelog, content(10_000, 4), 1234);

    assertArrayEquals(bytes, read(changelog));
    assertEquals(1, delta("localCorrupt"));
    assertEquals(bytes.length, delta("bytesReadPrimary"));
    assertArrayEquals(bytes, Files.readAllBytes(localCopy(changelog)));
    assertArrayEquals(bytes, read(changelog));
    assertEquals(1, delta("localHits"));
  }

  @Test
  void copyOfAnOverwrittenPrimaryIsNotServed() throws IOException {
    Path zip = new Path(partition, "5.zip");
    write(zip, content(3000, 5));
    // The batch ran again elsewhere: same name, same size, other bytes.
    Files.write(primaryFile(zip), content(3000, 6));
    Files.setLastModifiedTime(primaryFile(zip), FileTime.fromMillis(System.currentTimeMillis() + 5000));

    assertArrayEquals(content(3000, 6), read(zip));
    assertEquals(1, delta("localStale"));
    assertArrayEquals(content(3000, 6), Files.readAllBytes(localCopy(zip)));
  }

  @Test
  void failedPrimaryCloseLeavesNoCopy() throws IOException {
    LocalRecoveryFileSystem failing = open(FailingCloseFileSystem.class, localDir.toString());
    Path sst = new Path(partition, "SSTs/000002-b.sst");
    FSDataOutputStream out = failing.create(sst, true);
    out.write(content(1000, 7));
    assertThrows(IOException.class, out::close);
    assertFalse(Files.exists(localCopy(sst)));
    try (var staging = Files.list(localCopy(sst).getParent())) {
      assertEquals(0, staging.count());
    }
    assertEquals(0, delta("localFilesWritten"));
  }

  @Test
  void withoutTheNodeLocalVolumeNoCopiesAreKept() throws IOException {
    // The driver gets the executors' setting but not their volume.
    java.nio.file.Path unmounted = tmp.resolve("not-mounted/state");
    LocalRecoveryFileSystem driver = open(RawLocalFileSystem.class, unmounted.toString());
    Path zip = new Path(partition, "9.zip");
    try (FSDataOutputStream out = driver.create(zip, true)) {
      out.write(content(4000, 9));
    }
    try (FSDataInputStream in = driver.open(zip)) {
      assertArrayEquals(content(4000, 9), in.readAllBytes());
    }
    driver.close();
    assertFalse(Files.exists(tmp.resolve("not-mounted")));
    assertEquals(0, delta("localFilesWritten") + delta("localMisses") + delta("localWriteFailures"));
  }

  @Test
  void brokenLocalDirNeverFailsAWrite() throws IOException {
    java.nio.file.Path notADir = tmp.resolve("a-file");
    Files.write(notADir, new byte[1]);
    LocalRecoveryFileSystem broken = open(RawLocalFileSystem.class, notADir.resolve("local").toString());
    Path zip = new Path(partition, "6.zip");
    try (FSDataOutputStream out = broken.create(zip, true)) {
      out.write(content(4000, 8));
    }
    assertArrayEquals(content(4000, 8), Files.readAllBytes(primaryFile(zip)));
    assertTrue(delta("localWriteFailures") >= 1);
    try (FSDataInputStream in = broken.open(zip)) {
      assertArrayEquals(content(4000, 8), in.readAllBytes());
    }
    assertEquals(1, delta("localMisses"));
  }

  @Test
  void fileContextWritesThroughTempAndRename() throws IOException {
    // Spark's default CheckpointFileManager: FileContext create of .<name>.<uuid>.tmp, then rename OVERWRITE.
    Configuration conf = conf(RawLocalFileSystem.class, localDir.toString());
    conf.set("fs.AbstractFileSystem.file.impl", LocalRecoveryFs.class.getName());
    FileContext fc = FileContext.getFileContext(URI.create("file:///"), conf);
    Path zip = new Path(partition, "7.zip");
    Path temp = new Path(partition, ".7.zip.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f60.tmp");
    fc.mkdir(partition, FsPermission.getDirDefault(), true);
    try (FSDataOutputStream out = fc.create(temp, EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE))) {
      out.write(content(8000, 9));
    }
    fc.rename(temp, zip, Options.Rename.OVERWRITE);
    assertFalse(Files.exists(localCopy(temp)));
    assertArrayEquals(content(8000, 9), Files.readAllBytes(localCopy(zip)));

    try (FSDataInputStream in = fc.open(zip)) {
      assertArrayEquals(content(8000, 9), in.readAllBytes());
    }
    assertEquals(1, delta("localHits"));
    fc.delete(zip, false);
    assertFalse(Files.exists(localCopy(zip)));
  }

  @Test
  void copyFromAndToLocalFile() throws IOException {
    // RocksDBFileManager's upload and download of SST files.
    java.nio.file.Path source = tmp.resolve("rocksdb/000009.sst");
    Files.createDirectories(source.getParent());
    Files.write(source, content(70_000, 10));
    Path sst = new Path(partition, "SSTs/000009-c.sst");
    fs.copyFromLocalFile(new Path(source.toUri()), sst);
    assertArrayEquals(content(70_000, 10), Files.readAllBytes(localCopy(sst)));

    java.nio.file.Path restored = tmp.resolve("restore/000009.sst");
    fs.copyToLocalFile(sst, new Path(restored.toUri()));
    assertArrayEquals(content(70_000, 10), Files.readAllBytes(restored));
    assertEquals(1, delta("localHits"));
    assertEquals(0, delta("bytesReadPrimary"));
    assertEquals(70_000, delta("bytesReadLocal"));
    assertFalse(Files.exists(tmp.resolve("restore/.000009.sst.crc")), "no checksum sidecar");
  }

  @Test
  void copyToLocalFileReplacesACorruptOrMissingCopyFromThePrimary() throws IOException {
    Path sst = new Path(partition, "SSTs/000013-g.sst");
    byte[] bytes = writeWithFlippedCopy(sst, content(300_000, 13), 250_000);
    java.nio.file.Path restored = tmp.resolve("restore/000013.sst");
    Files.createDirectories(restored.getParent());
    Files.write(restored, new byte[] {1, 2, 3}); // a leftover of an earlier load

    fs.copyToLocalFile(sst, new Path(restored.toUri()));
    assertArrayEquals(bytes, Files.readAllBytes(restored));
    assertEquals(1, delta("localCorrupt"));
    assertEquals(bytes.length, delta("bytesReadPrimary"));
    assertArrayEquals(bytes, Files.readAllBytes(localCopy(sst)), "the copy was replaced");

    Files.delete(localCopy(sst));
    java.nio.file.Path again = tmp.resolve("restore/archive/000013.sst"); // a directory not there yet
    fs.copyToLocalFile(sst, new Path(again.toUri()));
    assertArrayEquals(bytes, Files.readAllBytes(again));
    assertEquals(1, delta("localMisses"));
    assertEquals(2L * bytes.length, delta("bytesReadPrimary"));
    fs.copyToLocalFile(sst, new Path(again.toUri()));
    assertEquals(1, delta("localHits"));
    assertEquals(2L * bytes.length, delta("bytesReadPrimary"), "the replaced copy serves");
  }

  @Test
  void deleteAndListingPruneCopies() throws IOException, InterruptedException {
    Path kept = new Path(partition, "SSTs/000010-d.sst");
    Path deleted = new Path(partition, "SSTs/000011-e.sst");
    Path goneElsewhere = new Path(partition, "SSTs/000012-f.sst");
    for (Path p : new Path[] {kept, deleted, goneElsewhere}) {
      write(p, content(100, 11));
    }
    fs.delete(deleted, false);
    assertFalse(Files.exists(localCopy(deleted)));

    Files.delete(primaryFile(goneElsewhere)); // another node's maintenance
    Thread.sleep(20);
    fs.listStatus(new Path(partition, "SSTs"));
    assertFalse(Files.exists(localCopy(goneElsewhere)));
    assertTrue(Files.exists(localCopy(kept)));
    assertEquals(2, delta("localFilesPruned"));

    fs.delete(partition, true);
    assertFalse(Files.exists(localCopy(kept)));
  }

  @Test
  void deletedPrimaryIsNotServedFromACopy() throws IOException {
    Path delta = new Path(partition, "8.delta");
    write(delta, content(100, 12));
    Files.delete(primaryFile(delta));
    assertThrows(FileNotFoundException.class, () -> read(delta));
    assertFalse(Files.exists(localCopy(delta)));
  }

  @Test
  void statsFileIsWrittenAtClose() throws IOException {
    write(new Path(partition, "9.snapshot"), content(10, 13));
    fs.close();
    java.nio.file.Path stats = localDir.resolve(
        "_stats/" + LocalRecoveryStats.hostName() + "-" + ProcessHandle.current().pid() + ".json");
    String json = Files.readString(stats, UTF_8);
    assertTrue(json.contains("\"localFilesWritten\": "), json);
  }

  // -- The record's MAC: whoever can write the local dir but lacks the job's key cannot make a copy serve. --

  @Test
  void forgedCopyAndRecordAreRejected() throws Exception {
    Path zip = new Path(partition, "20.zip");
    byte[] bytes = content(6000, 20);
    write(zip, bytes);
    byte[] evil = content(6000, 21); // same length: only the MAC can tell

    forge(zip, evil, OTHER_KEY);
    assertArrayEquals(bytes, read(zip));
    assertEquals(1, delta("localRejected"));
    assertEquals(0, delta("localHits"));
    assertEquals(bytes.length, delta("bytesReadPrimary"));
    assertArrayEquals(bytes, Files.readAllBytes(localCopy(zip)), "replaced by the primary's bytes");

    // The control: the same forgery with the job's key is served, so the key is what stops it above.
    forge(zip, evil, KEY);
    assertArrayEquals(evil, read(zip));
    assertEquals(1, delta("localHits"));
  }

  @Test
  void tamperedCopyOrRecordIsNotServed() throws Exception {
    Path sst = new Path(partition, "SSTs/000020-h.sst");
    byte[] bytes = content(50_000, 22);
    write(sst, bytes);
    String genuine = Files.readString(record(sst), UTF_8);
    byte[] evil = content(50_000, 23);

    // Other bytes under the genuine record: the digest differs.
    Files.write(localCopy(sst), evil);
    assertArrayEquals(bytes, read(sst));
    assertEquals(1, delta("localCorrupt"));

    // Other bytes and their digest in the genuine record, its MAC kept: the MAC no longer verifies.
    String[] fields = genuine.split(" ", 4);
    String digest = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(evil));
    Files.write(localCopy(sst), evil);
    Files.writeString(record(sst), String.join(" ", fields[0], digest, fields[2], fields[3]));
    java.nio.file.Path restored = tmp.resolve("restore/000020.sst");
    fs.copyToLocalFile(sst, new Path(restored.toUri()));
    assertArrayEquals(bytes, Files.readAllBytes(restored));
    assertEquals(1, delta("localRejected"));

    // A record without a MAC (the format before keys) is not trusted either.
    Files.writeString(record(sst), fields[0] + " 1a2b3c " + fields[3]);
    assertArrayEquals(bytes, read(sst));
    assertEquals(2, delta("localRejected"));
    assertEquals(0, delta("localHits"));
  }

  @Test
  void genuineCopyOfAnotherFileIsNotServed() throws IOException {
    // A valid copy and record replayed under another name: the MAC binds them to their remote path.
    Path older = new Path(partition, "30.zip");
    Path newer = new Path(partition, "31.zip");
    write(older, content(4000, 30));
    write(newer, content(4000, 31));
    Files.copy(localCopy(older), localCopy(newer), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    String olderRecord = Files.readString(record(older), UTF_8);
    String newerIdentity = Files.readString(record(newer), UTF_8).split(" ", 4)[3];
    String[] fields = olderRecord.split(" ", 4);
    Files.writeString(record(newer), String.join(" ", fields[0], fields[1], fields[2], newerIdentity));

    assertArrayEquals(content(4000, 31), read(newer));
    assertEquals(1, delta("localRejected"));
  }

  @Test
  void copiesWrittenWithAnotherKeyAreNotTrusted() throws IOException {
    Path zip = new Path(partition, "40.zip");
    write(zip, content(7000, 40));
    keyFile = writeKey("other-key", OTHER_KEY);
    try (LocalRecoveryFileSystem other = open(RawLocalFileSystem.class, localDir.toString())) {
      try (FSDataInputStream in = other.open(zip)) {
        assertArrayEquals(content(7000, 40), in.readAllBytes());
      }
    }
    assertEquals(1, delta("localRejected"));
    assertEquals(0, delta("localHits"));
    assertEquals(7000, delta("bytesReadPrimary"));
  }

  @Test
  void withoutAKeyNothingIsCopiedOrTrusted() throws IOException {
    Path zip = new Path(partition, "50.zip");
    write(zip, content(5000, 50)); // a copy made with the key
    Configuration noKey = conf(RawLocalFileSystem.class, localDir.toString());
    noKey.unset(LocalRecoveryFileSystem.KEY_FILE);
    Configuration shortKey = conf(RawLocalFileSystem.class, localDir.toString());
    shortKey.set(LocalRecoveryFileSystem.KEY_FILE, writeKey("short", new byte[16]).toString());
    Configuration unreadable = conf(RawLocalFileSystem.class, localDir.toString());
    unreadable.set(LocalRecoveryFileSystem.KEY_FILE, tmp.resolve("no-such-key").toString());
    for (Configuration conf : Arrays.asList(noKey, shortKey, unreadable)) {
      try (LocalRecoveryFileSystem keyless = open(conf)) {
        Path sst = new Path(partition, "SSTs/000050-" + conf.hashCode() + ".sst");
        try (FSDataOutputStream out = keyless.create(sst, true)) {
          out.write(content(100, 51));
        }
        assertFalse(Files.exists(localCopy(sst)));
        try (FSDataInputStream in = keyless.open(zip)) {
          assertArrayEquals(content(5000, 50), in.readAllBytes());
        }
      }
    }
    assertEquals(0, delta("localHits") + delta("localMisses") + delta("localWriteFailures"));
    assertEquals(1, delta("localFilesWritten"));
  }

  @Test
  void renameDropsACopyWithAForgedRecord() throws Exception {
    Configuration conf = conf(RawLocalFileSystem.class, localDir.toString());
    conf.set("fs.AbstractFileSystem.file.impl", LocalRecoveryFs.class.getName());
    FileContext fc = FileContext.getFileContext(URI.create("file:///"), conf);
    Path zip = new Path(partition, "60.zip");
    Path temp = new Path(partition, ".60.zip.0f4c5a4e-1b7e-4a5e-9f3b-2a1c3d4e5f61.tmp");
    fc.mkdir(partition, FsPermission.getDirDefault(), true);
    try (FSDataOutputStream out = fc.create(temp, EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE))) {
      out.write(content(8000, 60));
    }
    forge(temp, content(8000, 61), OTHER_KEY); // between the write and Spark's rename
    fc.rename(temp, zip, Options.Rename.OVERWRITE);
    assertFalse(Files.exists(localCopy(zip)));
    assertEquals(1, delta("localRejected"));
    assertArrayEquals(content(8000, 60), read(zip));
  }

  /** A primary whose close() fails, like an S3 upload that does not complete. */
  public static class FailingCloseFileSystem extends RawLocalFileSystem {
    @Override
    public FSDataOutputStream create(
        Path f,
        FsPermission permission,
        boolean overwrite,
        int bufferSize,
        short replication,
        long blockSize,
        Progressable progress)
        throws IOException {
      OutputStream real = super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
      return new FSDataOutputStream(
          new OutputStream() {
            @Override
            public void write(int b) throws IOException {
              real.write(b);
            }

            @Override
            public void close() throws IOException {
              real.close();
              throw new IOException("upload failed");
            }
          },
          null);
    }
  }
}
