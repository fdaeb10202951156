package io.ftspark.localrecovery;

import static io.ftspark.localrecovery.LocalRecoveryStats.Counter;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.EtagSource;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node-local copies: {@code <root>/<scheme>/<authority>/<path>}, each with a record {@code <file>.lrmeta}
 * ({@code <length> <sha256> <mac> <primary identity>}). A copy is written under a unique staging name, renamed
 * into place, then its record is written; a reader trusts a copy only if the record's MAC verifies under the
 * job's key, the record matches the primary's current FileStatus and the copy's SHA-256 matches the record.
 * The MAC (HMAC-SHA256) covers the remote path, the primary's identity, the length and the content digest:
 * whoever can write the directory but lacks the key cannot make a copy of other bytes, or of another file,
 * serve. Nothing is fsynced: the digest catches what a crash leaves behind. Every local failure is counted and
 * swallowed: the primary is always the truth.
 */
final class LocalStore {
  private static final Logger LOG = LoggerFactory.getLogger(LocalStore.class);
  private static final String RECORD = ".lrmeta";
  private static final String STAGING = ".lrpart";
  private static final long STALE_STAGING_MS = 3_600_000;
  private static final int BUFFER = 1 << 16;
  private static final int COPY_BUFFER = 1 << 20;
  private static final String MAC = "HmacSHA256";
  private static final AtomicLong failures = new AtomicLong();
  private static final AtomicBoolean rejectionLogged = new AtomicBoolean();

  interface IOSupplier<T> {
    T get() throws IOException;
  }

  private final Path root;
  private final SecretKeySpec key;
  private final RawLocalFileSystem local = new RawLocalFileSystem();

  LocalStore(Path root, byte[] key, Configuration conf) throws IOException {
    this.root = root;
    this.key = new SecretKeySpec(key, MAC);
    local.initialize(URI.create("file:///"), conf);
  }

  /** Where the copy of a (qualified) remote path lives. */
  Path fileFor(org.apache.hadoop.fs.Path remote) {
    URI uri = remote.toUri();
    String authority = uri.getAuthority() == null ? "_" : uri.getAuthority();
    return root.resolve(uri.getScheme()).resolve(authority).resolve(uri.getPath().replaceFirst("^/+", ""));
  }

  /**
   * The verified local copy of a primary file, or else the primary's bytes, copied here on the way (a miss or a
   * bad copy is replaced transparently).
   */
  FSDataInputStream open(
      org.apache.hadoop.fs.Path remote, FileStatus primary, IOSupplier<FSDataInputStream> openPrimary)
      throws IOException {
    Path file = fileFor(remote);
    FSDataInputStream verified = verified(file, remote, primary);
    if (verified != null) {
      LocalRecoveryStats.add(Counter.localHits, 1);
      LocalRecoveryStats.add(Counter.bytesReadLocal, primary.getLen());
      return verified;
    }
    return fetch(remote, primary, openPrimary);
  }

  /** The primary's bytes, copied here on the way (replacing a missing, stale or corrupt copy). */
  FSDataInputStream fetch(
      org.apache.hadoop.fs.Path remote, FileStatus primary, IOSupplier<FSDataInputStream> openPrimary)
      throws IOException {
    Path file = fileFor(remote);
    LocalRecoveryStats.add(Counter.bytesReadPrimary, primary.getLen());
    Staging copy = stage(remote);
    if (!copy.isOpen()) {
      return openPrimary.get();
    }
    byte[] buffer = new byte[BUFFER];
    try (InputStream in = openPrimary.get()) {
      for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
        copy.write(buffer, 0, n);
      }
    } catch (IOException | RuntimeException e) {
      copy.abort();
      throw e;
    }
    if (copy.commit(() -> primary)) {
      try {
        return local.open(toHadoop(file));
      } catch (IOException e) {
        failed("open of the fetched copy", file, e);
      }
    }
    LocalRecoveryStats.add(Counter.bytesReadPrimary, primary.getLen());
    return openPrimary.get();
  }

  /**
   * Restores a state file into dst straight from its verified copy in one pass: each block is checksummed
   * on its way to dst, so the copy is read once and dst written once (a verified open() and Hadoop's copy would
   * read it twice). False, counted and with dst removed, if the copy cannot serve: the caller fetches.
   */
  boolean copyTo(org.apache.hadoop.fs.Path remote, FileStatus primary, Path dst) {
    Path file = fileFor(remote);
    Record record = usableRecord(file, remote, primary);
    if (record == null) {
      return false;
    }
    MessageDigest digest = sha256();
    long length = 0;
    try {
      Files.createDirectories(dst.getParent());
      try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ);
          FileChannel out =
              FileChannel.open(
                  dst, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
        ByteBuffer buffer = ByteBuffer.allocateDirect(COPY_BUFFER);
        while (in.read(buffer) >= 0) {
          buffer.flip();
          digest.update(buffer.duplicate());
          length += buffer.remaining();
          while (buffer.hasRemaining()) {
            out.write(buffer);
          }
          buffer.clear();
        }
      }
      if (record.matches(length, digest)) {
        LocalRecoveryStats.add(Counter.localHits, 1);
        LocalRecoveryStats.add(Counter.bytesReadLocal, length);
        return true;
      }
      LOG.warn("Local copy {} is corrupt ({} bytes, expected {}); reading the primary", file, length, record.length);
    } catch (IOException | RuntimeException e) {
      LOG.warn("Local copy {} could not be restored to {}; reading the primary", file, dst, e);
    }
    try {
      Files.deleteIfExists(dst);
    } catch (IOException e) {
      failed("cleanup of a failed restore", dst, e);
    }
    LocalRecoveryStats.add(Counter.localCorrupt, 1);
    return false;
  }

  /** A local copy being written next to a primary write; inert if the local dir fails. */
  Staging stage(org.apache.hadoop.fs.Path remote) {
    return new Staging(remote);
  }

  /** The primary was renamed: move the copy along (re-identified), or drop what no longer matches. */
  void renamed(org.apache.hadoop.fs.Path src, org.apache.hadoop.fs.Path dst, IOSupplier<FileStatus> dstStatus) {
    Path from = fileFor(src);
    Path to = fileFor(dst);
    try {
      Record record = Files.isRegularFile(from) && StateFiles.isTracked(dst) ? authenticRecord(from, src) : null;
      if (record == null) {
        delete(src);
        delete(dst);
        return;
      }
      Files.createDirectories(to.getParent());
      Files.move(from, to, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      Files.deleteIfExists(recordOf(from));
      touch(to);
      FileStatus status = dstStatus.get();
      if (status.getLen() != record.length) {
        throw new IOException("renamed primary has " + status.getLen() + " bytes, local copy " + record.length);
      }
      seal(dst, record.length, record.digest, identity(status)).write(to);
    } catch (IOException | RuntimeException e) {
      failed("rename", to, e);
      delete(src);
      delete(dst);
    }
  }

  /** Prunes the copy of a deleted primary file, or all copies under a deleted directory. */
  void delete(org.apache.hadoop.fs.Path remote) {
    Path file = fileFor(remote);
    try {
      if (Files.isDirectory(file)) {
        try (Stream<Path> tree = Files.walk(file)) {
          for (Path p : (Iterable<Path>) tree.sorted(Comparator.reverseOrder())::iterator) {
            if (Files.isRegularFile(p) && isData(p.getFileName().toString())) {
              LocalRecoveryStats.add(Counter.localFilesPruned, 1);
            }
            Files.deleteIfExists(p);
          }
        }
      } else if (Files.deleteIfExists(file)) {
        LocalRecoveryStats.add(Counter.localFilesPruned, 1);
      }
      Files.deleteIfExists(recordOf(file));
    } catch (IOException | RuntimeException e) {
      failed("delete", file, e);
    }
  }

  /**
   * Reconciles a local directory with a listing of its primary: copies of files that are gone there are
   * pruned (Spark's maintenance deletes old versions from any executor; the copies on other nodes go here).
   * Copies finalized after the listing started are kept: their primary may be newer than the listing.
   */
  void sweep(org.apache.hadoop.fs.Path dir, FileStatus[] listing, long listedAt) {
    Path localDir = fileFor(dir);
    if (!Files.isDirectory(localDir)) {
      return;
    }
    Set<String> names = new HashSet<>();
    for (FileStatus status : listing) {
      names.add(status.getPath().getName());
    }
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(localDir, Files::isRegularFile)) {
      for (Path entry : entries) {
        String name = entry.getFileName().toString();
        long modified = Files.getLastModifiedTime(entry).toMillis();
        boolean orphan =
            name.endsWith(STAGING)
                ? modified < listedAt - STALE_STAGING_MS
                : !names.contains(name.endsWith(RECORD) ? name.substring(0, name.length() - RECORD.length()) : name)
                    && modified < listedAt;
        if (orphan && Files.deleteIfExists(entry) && isData(name)) {
          LocalRecoveryStats.add(Counter.localFilesPruned, 1);
        }
      }
    } catch (IOException | RuntimeException e) {
      failed("sweep", localDir, e);
    }
  }

  void writeStats(boolean force) {
    LocalRecoveryStats.writeTo(root, force);
  }

  /**
   * The copy's record if it is authentic (its MAC verifies under the job's key) and describes the primary's
   * current version; null (counted) if not.
   */
  private Record usableRecord(Path file, org.apache.hadoop.fs.Path remote, FileStatus primary) {
    if (!Files.isRegularFile(file) || !Files.exists(recordOf(file))) {
      LocalRecoveryStats.add(Counter.localMisses, 1);
      return null;
    }
    Record record = authenticRecord(file, remote);
    if (record == null) {
      return null;
    }
    if (record.length != primary.getLen() || !record.identity.equals(identity(primary))) {
      LocalRecoveryStats.add(Counter.localStale, 1);
      return null;
    }
    return record;
  }

  /** The copy, opened and checked against its record and the primary; null (counted) if it cannot serve. */
  private FSDataInputStream verified(Path file, org.apache.hadoop.fs.Path remote, FileStatus primary) {
    Record record = usableRecord(file, remote, primary);
    if (record == null) {
      return null;
    }
    FSDataInputStream in = null;
    try {
      // One descriptor for the check and the reads: a concurrent replacement cannot slip in between.
      in = local.open(toHadoop(file), BUFFER);
      MessageDigest digest = sha256();
      byte[] buffer = new byte[BUFFER];
      long length = 0;
      for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
        digest.update(buffer, 0, n);
        length += n;
      }
      if (record.matches(length, digest)) {
        in.seek(0);
        return in;
      }
      LOG.warn("Local copy {} is corrupt ({} bytes, expected {}); reading the primary", file, length, record.length);
    } catch (IOException | RuntimeException e) {
      LOG.warn("Local copy {} is unreadable; reading the primary", file, e);
    }
    closeQuietly(in);
    LocalRecoveryStats.add(Counter.localCorrupt, 1);
    return null;
  }

  /** The primary's version: its ETag where it has one (S3), else its modification time. */
  static String identity(FileStatus status) {
    String etag = status instanceof EtagSource ? ((EtagSource) status).getEtag() : null;
    return etag != null && !etag.isEmpty() ? "etag:" + etag : "mtime:" + status.getModificationTime();
  }

  private static boolean isData(String name) {
    return !name.endsWith(RECORD) && !name.endsWith(STAGING);
  }

  private static Path recordOf(Path file) {
    return file.resolveSibling(file.getFileName() + RECORD);
  }

  private static org.apache.hadoop.fs.Path toHadoop(Path file) {
    return new org.apache.hadoop.fs.Path(file.toUri());
  }

  /** Marks a local copy's finalization time, which sweep() compares with listings. */
  private static void touch(Path file) throws IOException {
    Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis()));
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      if (c != null) {
        c.close();
      }
    } catch (Exception ignored) {
      // Nothing left to do with a copy we are abandoning.
    }
  }

  private void failed(String what, Path file, Exception e) {
    LocalRecoveryStats.add(Counter.localWriteFailures, 1);
    long n = failures.incrementAndGet();
    // Logged on the 1st, 2nd, 4th, 8th, ... failure: a full disk fails every file.
    if (Long.bitCount(n) == 1) {
      LOG.warn("Local recovery copy failed ({}, {} failures so far): {}", what, n, file, e);
    }
    writeStats(false);
  }

  /** A record under the job's key: its MAC binds the copy's content to this remote path and version. */
  private Record seal(org.apache.hadoop.fs.Path remote, long length, byte[] digest, String identity) {
    return new Record(length, digest, mac(remote, length, digest, identity), identity);
  }

  /** The copy's record if its MAC verifies; null if there is none, or (rejected) if it does not verify. */
  private Record authenticRecord(Path file, org.apache.hadoop.fs.Path remote) {
    try {
      Record record = Record.read(file);
      if (record == null
          || MessageDigest.isEqual(record.mac, mac(remote, record.length, record.digest, record.identity))) {
        return record;
      }
    } catch (IOException | RuntimeException e) {
      // A record that does not parse (no MAC, say) is no more trusted than one that does not verify.
    }
    rejected(file);
    return null;
  }

  private byte[] mac(org.apache.hadoop.fs.Path remote, long length, byte[] digest, String identity) {
    // Length-prefixed fields: no two different tuples share an encoding.
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(message)) {
      out.writeUTF("ftspark-local-recovery-v1");
      out.writeUTF(remote.toUri().toString());
      out.writeUTF(identity);
      out.writeLong(length);
      out.write(digest);
      Mac mac = Mac.getInstance(MAC);
      mac.init(key);
      return mac.doFinal(message.toByteArray());
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalStateException("HMAC-SHA256 unavailable", e);
    }
  }

  /** A copy whose record does not verify: never served, counted, logged once per JVM (it may be an attack). */
  private static void rejected(Path file) {
    LocalRecoveryStats.add(Counter.localRejected, 1);
    if (rejectionLogged.compareAndSet(false, true)) {
      LOG.warn(
          "Local copy {} has no valid MAC under this job's key (forged, or written with another key); reading"
              + " the primary. Later rejections are only counted (localRejected).",
          file);
    }
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 unavailable", e);
    }
  }

  private record Record(long length, byte[] digest, byte[] mac, String identity) {
    /** Null without a record; throws for one that does not parse. */
    static Record read(Path file) throws IOException {
      String[] fields;
      try {
        fields = Files.readString(recordOf(file), StandardCharsets.UTF_8).trim().split(" ", 4);
      } catch (NoSuchFileException e) {
        return null;
      }
      HexFormat hex = HexFormat.of();
      return new Record(Long.parseLong(fields[0]), hex.parseHex(fields[1]), hex.parseHex(fields[2]), fields[3]);
    }

    boolean matches(long actualLength, MessageDigest actual) {
      return actualLength == length && MessageDigest.isEqual(actual.digest(), digest);
    }

    void write(Path file) throws IOException {
      Path temp = file.resolveSibling("." + file.getFileName() + "." + UUID.randomUUID() + STAGING);
      HexFormat hex = HexFormat.of();
      Files.writeString(
          temp,
          length + " " + hex.formatHex(digest) + " " + hex.formatHex(mac) + " " + identity,
          StandardCharsets.UTF_8);
      Files.move(temp, recordOf(file), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
  }

  /** A copy in the making: bytes go to a staging file; commit() puts it in place once the primary is complete. */
  final class Staging {
    private final org.apache.hadoop.fs.Path remote;
    private final Path target;
    private final Path temp;
    private final MessageDigest digest = sha256();
    private OutputStream out;
    private long length;
    private long nanos;

    private Staging(org.apache.hadoop.fs.Path remote) {
      this.remote = remote;
      this.target = fileFor(remote);
      this.temp = target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + STAGING);
      long start = System.nanoTime();
      try {
        Files.createDirectories(target.getParent());
        out = Files.newOutputStream(temp);
      } catch (IOException | RuntimeException e) {
        failed("create", temp, e);
      }
      nanos += System.nanoTime() - start;
    }

    boolean isOpen() {
      return out != null;
    }

    void write(byte[] b, int off, int len) {
      if (out == null) {
        return;
      }
      long start = System.nanoTime();
      try {
        out.write(b, off, len);
        digest.update(b, off, len);
        length += len;
      } catch (IOException | RuntimeException e) {
        abort();
        failed("write", temp, e);
      }
      nanos += System.nanoTime() - start;
    }

    /** Called only after the primary is complete; {@code primary} gives its status, or null if not needed yet. */
    boolean commit(IOSupplier<FileStatus> primary) {
      if (out == null) {
        return false;
      }
      long start = System.nanoTime();
      try {
        out.close();
        out = null;
        FileStatus status = primary.get();
        if (status != null && status.getLen() != length) {
          throw new IOException("primary has " + status.getLen() + " bytes, local copy " + length);
        }
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        touch(target);
        seal(remote, length, digest.digest(), status == null ? "-" : identity(status)).write(target);
        LocalRecoveryStats.add(Counter.localFilesWritten, 1);
        LocalRecoveryStats.add(Counter.localBytesWritten, length);
        return true;
      } catch (IOException | RuntimeException e) {
        abort();
        failed("commit", target, e);
        return false;
      } finally {
        nanos += System.nanoTime() - start;
        LocalRecoveryStats.add(Counter.localWriteNanos, nanos);
        writeStats(false);
      }
    }

    void abort() {
      closeQuietly(out);
      out = null;
      try {
        Files.deleteIfExists(temp);
      } catch (IOException e) {
        // A leftover staging file is pruned by a later sweep.
      }
    }
  }
}
