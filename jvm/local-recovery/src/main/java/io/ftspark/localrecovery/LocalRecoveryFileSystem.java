package io.ftspark.localrecovery;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.EnumSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.fs.FilterFileSystem;
import org.apache.hadoop.fs.FutureDataInputStreamBuilder;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.fs.Syncable;
import org.apache.hadoop.fs.impl.OpenFileParameters;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A FileSystem for the checkpoint scheme that delegates everything to the real one (S3A) and keeps a verified
 * node-local copy of immutable state store files (docs/local-recovery.md, {@link StateFiles}).
 *
 * <pre>
 * spark.hadoop.fs.s3a.impl=io.ftspark.localrecovery.LocalRecoveryFileSystem
 * spark.hadoop.fs.AbstractFileSystem.s3a.impl=io.ftspark.localrecovery.LocalRecoveryFs
 * spark.hadoop.fs.ftspark.local-recovery.delegate.impl=org.apache.hadoop.fs.s3a.S3AFileSystem  (the default)
 * spark.hadoop.fs.ftspark.local-recovery.dir=/node-local/dir     (unset: a plain pass-through)
 * spark.hadoop.fs.ftspark.local-recovery.key.file=/path/to/key    (the job's MAC key; unset: a pass-through)
 * </pre>
 *
 * <p>Writes: the primary stream is written first; the local copy is finalized only after the primary's close()
 * succeeded, and its failures never reach the caller. Reads: one getFileStatus of the primary (no data bytes),
 * then the local copy if it matches, else the primary's bytes, copied locally on the way. FilterFileSystem
 * forwards several entry points straight to the delegate (copyFromLocalFile, copyToLocalFile, openFile,
 * primitiveCreate, createNonRecursive), so each of those is intercepted here. Writers this class does
 * not see (createFile builders) cannot do harm: a copy serves only if it matches the primary's current ETag or
 * modification time.
 */
public class LocalRecoveryFileSystem extends FilterFileSystem {
  public static final String DELEGATE_IMPL = "fs.ftspark.local-recovery.delegate.impl";
  public static final String DIR = "fs.ftspark.local-recovery.dir";
  public static final String KEY_FILE = "fs.ftspark.local-recovery.key.file";
  /** Shorter keys are refused: HMAC-SHA256 wants at least its output size. */
  static final int MIN_KEY_BYTES = 32;
  private static final String DEFAULT_DELEGATE = "org.apache.hadoop.fs.s3a.S3AFileSystem";
  // S3A's keys by value: Hadoop 3.4 (Spark 4.0's) has no conditional create and ignores the builder option.
  private static final String CONDITIONAL_CREATE_ENABLED = "fs.s3a.create.conditional.enabled";
  private static final String CONDITIONAL_OVERWRITE = "fs.option.create.conditional.overwrite";
  private static final String CREATE_PERFORMANCE = "fs.s3a.create.performance";
  private static final String PRECONDITION_FAILED = "org.apache.hadoop.fs.s3a.RemoteFileChangedException";

  private static final Logger LOG = LoggerFactory.getLogger(LocalRecoveryFileSystem.class);
  private static final AtomicBoolean noKeyLogged = new AtomicBoolean();

  private LocalStore store;

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    String impl = conf.getTrimmed(DELEGATE_IMPL, DEFAULT_DELEGATE);
    try {
      fs = conf.getClassByName(impl).asSubclass(FileSystem.class).getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException | ClassCastException e) {
      throw new IOException("cannot create the delegate FileSystem " + impl, e);
    }
    fs.initialize(name, conf);
    super.initialize(name, conf);
    String dir = conf.getTrimmed(DIR, "");
    byte[] key = dir.isEmpty() || !hasVolume(Paths.get(dir)) ? null : readKey(conf.getTrimmed(KEY_FILE, ""));
    store = key == null ? null : new LocalStore(Paths.get(dir), key, conf);
  }

  /**
   * The job's MAC key (the operator's per-job Secret, mounted as a file), or null: without it no copy can be
   * trusted, so none is written or read.
   */
  private static byte[] readKey(String file) {
    String problem;
    try {
      byte[] key = file.isEmpty() ? null : Files.readAllBytes(Paths.get(file));
      if (key != null && key.length >= MIN_KEY_BYTES) {
        return key;
      }
      problem = key == null ? KEY_FILE + " is not set" : "the key is shorter than " + MIN_KEY_BYTES + " bytes";
    } catch (IOException | RuntimeException e) {
      problem = "cannot read " + file + ": " + e;
    }
    if (noKeyLogged.compareAndSet(false, true)) {
      LOG.warn(
          "No local-recovery key ({}): no local copies of state in this JVM, state is read from the primary",
          problem);
    }
    return null;
  }

  /**
   * The setting reaches the driver too (spark.hadoop.* is one configuration), but only executors mount the
   * node-local volume: where the directory's parent does not exist, this JVM keeps no copies.
   */
  private static boolean hasVolume(java.nio.file.Path dir) {
    java.nio.file.Path parent = dir.toAbsolutePath().getParent();
    if (parent == null || Files.exists(parent)) {
      return true;
    }
    LOG.info("No node-local volume at {}: no local copies of state in this JVM", parent);
    return false;
  }

  private boolean tracked(Path path) {
    return store != null && StateFiles.isTracked(path);
  }

  @Override
  public FSDataInputStream open(Path path, int bufferSize) throws IOException {
    return tracked(path) ? openTracked(makeQualified(path)) : fs.open(path, bufferSize);
  }

  @Override
  public FutureDataInputStreamBuilder openFile(Path path) throws IOException {
    // FilterFileSystem hands out the delegate's builder, which would open behind our back.
    return tracked(path) ? createDataInputStreamBuilder(this, path) : super.openFile(path);
  }

  @Override
  protected CompletableFuture<FSDataInputStream> openFileWithOptions(Path path, OpenFileParameters parameters)
      throws IOException {
    return tracked(path)
        ? CompletableFuture.completedFuture(openTracked(makeQualified(path)))
        : super.openFileWithOptions(path, parameters);
  }

  private FSDataInputStream openTracked(Path path) throws IOException {
    return store.open(path, primaryStatus(path), () -> fs.open(path));
  }

  /** One HEAD of the primary; a primary gone takes its copy with it. */
  private FileStatus primaryStatus(Path path) throws IOException {
    try {
      return fs.getFileStatus(path);
    } catch (FileNotFoundException e) {
      store.delete(path);
      throw e;
    }
  }

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
    return teeIfTracked(f, super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress));
  }

  @Override
  public FSDataOutputStream create(
      Path f,
      FsPermission permission,
      EnumSet<CreateFlag> flags,
      int bufferSize,
      short replication,
      long blockSize,
      Progressable progress,
      Options.ChecksumOpt checksumOpt)
      throws IOException {
    return teeIfTracked(
        f, super.create(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt));
  }

  /** FileContext's create (Spark's default CheckpointFileManager) arrives here through LocalRecoveryFs. */
  @Override
  protected FSDataOutputStream primitiveCreate(
      Path f,
      FsPermission permission,
      EnumSet<CreateFlag> flags,
      int bufferSize,
      short replication,
      long blockSize,
      Progressable progress,
      Options.ChecksumOpt checksumOpt)
      throws IOException {
    return teeIfTracked(
        f, super.primitiveCreate(f, permission, flags, bufferSize, replication, blockSize, progress, checksumOpt));
  }

  @Override
  public FSDataOutputStream createNonRecursive(
      Path f,
      FsPermission permission,
      EnumSet<CreateFlag> flags,
      int bufferSize,
      short replication,
      long blockSize,
      Progressable progress)
      throws IOException {
    return teeIfTracked(
        f, super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize, progress));
  }

  private FSDataOutputStream teeIfTracked(Path f, FSDataOutputStream primary) {
    if (!tracked(f)) {
      return primary;
    }
    Path path = makeQualified(f);
    LocalStore.Staging copy = store.stage(path);
    // A temporary name is renamed before anyone reads it: rename() identifies the copy, saving a HEAD here.
    LocalStore.IOSupplier<FileStatus> status =
        StateFiles.isSparkTemp(path) ? () -> null : () -> fs.getFileStatus(path);
    return new FSDataOutputStream(new TeeStream(primary, copy, status), null);
  }

  /**
   * Writes a local file's bytes to {@code dst} of the S3A delegate in one PUT, without S3A's probes: unless
   * {@code overwrite}, conditional on no object there (If-None-Match: an existing one is refused with
   * FileAlreadyExistsException, atomically); where conditional writes are off ({@code
   * fs.s3a.create.conditional.enabled=false}, for a store without them) or unknown (Hadoop 3.4), after S3A's
   * own probe instead. A state file gets its local copy as through create().
   */
  void put(java.nio.file.Path source, Path dst, boolean overwrite) throws IOException {
    FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(dst).recursive().overwrite(overwrite);
    if (overwrite) {
      builder.opt(CREATE_PERFORMANCE, true);
    } else if (getConf().getBoolean(CONDITIONAL_CREATE_ENABLED, true)) {
      builder.opt(CONDITIONAL_OVERWRITE, true);
    }
    try (FSDataOutputStream out = teeIfTracked(dst, builder.build())) {
      Files.copy(source, out);
    } catch (IOException e) {
      if (!overwrite && LocalRecoveryFs.isA(e, PRECONDITION_FAILED)) {
        throw (IOException) new FileAlreadyExistsException(dst + " already exists").initCause(e);
      }
      throw e;
    }
  }

  /**
   * RocksDB uploads its SST and log files with copyFromLocalFile. S3A's own upload goes through the SDK's async
   * transfer manager and this class would not see the bytes; state files go through create() instead, which
   * tees the local copy (and works with S3 servers the async client trips over, such as moto).
   */
  @Override
  public void copyFromLocalFile(boolean delSrc, Path src, Path dst) throws IOException {
    copyFromLocalFile(delSrc, true, src, dst);
  }

  @Override
  public void copyFromLocalFile(boolean delSrc, boolean overwrite, Path src, Path dst) throws IOException {
    if (StateFiles.isTracked(dst)) {
      FileUtil.copy(getLocal(getConf()), src, this, dst, delSrc, overwrite, getConf());
    } else {
      super.copyFromLocalFile(delSrc, overwrite, src, dst);
    }
  }

  /** RocksDB downloads with copyToLocalFile: FileSystem's implementation reads through this.openFile(). */
  @Override
  public void copyToLocalFile(boolean delSrc, Path src, Path dst) throws IOException {
    copyToLocalFile(delSrc, src, dst, false);
  }

  /**
   * A state file is restored from its verified copy in one pass, else from the primary (which replaces the
   * copy). Either way without Hadoop's checksum sidecar: Spark checks the size, our record the CRC32C.
   */
  @Override
  public void copyToLocalFile(boolean delSrc, Path src, Path dst, boolean useRawLocalFileSystem) throws IOException {
    if (delSrc || !tracked(src)) {
      super.copyToLocalFile(delSrc, src, dst, useRawLocalFileSystem);
      return;
    }
    Path path = makeQualified(src);
    FileStatus primary = primaryStatus(path);
    java.nio.file.Path target = getLocal(getConf()).pathToFile(dst).toPath();
    if (!store.copyTo(path, primary, target)) {
      try (InputStream in = store.fetch(path, primary, () -> fs.open(path))) {
        Files.createDirectories(target.getParent());
        Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
      }
    }
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    boolean renamed = super.rename(src, dst);
    if (renamed) {
      afterRename(src, dst);
    }
    return renamed;
  }

  @Override
  protected void rename(Path src, Path dst, Options.Rename... options) throws IOException {
    super.rename(src, dst, options);
    afterRename(src, dst);
  }

  private void afterRename(Path src, Path dst) {
    if (store != null) {
      Path to = makeQualified(dst);
      store.renamed(makeQualified(src), to, () -> fs.getFileStatus(to));
    }
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    boolean deleted = super.delete(f, recursive);
    if (store != null) {
      store.delete(makeQualified(f));
    }
    return deleted;
  }

  /** Spark lists state directories before its maintenance deletes: the listing prunes copies gone elsewhere. */
  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    long listedAt = System.currentTimeMillis();
    FileStatus[] listing = super.listStatus(f);
    if (store != null) {
      store.sweep(makeQualified(f), listing, listedAt);
    }
    return listing;
  }

  @Override
  public void close() throws IOException {
    if (store != null) {
      store.writeStats(true);
    }
    super.close();
  }

  /** Writes the primary; the local copy follows every byte and is committed only after the primary closed. */
  private static final class TeeStream extends OutputStream implements Syncable, StreamCapabilities, Abortable {
    private final FSDataOutputStream primary;
    private final LocalStore.Staging copy;
    private final LocalStore.IOSupplier<FileStatus> status;
    private boolean closed;

    TeeStream(FSDataOutputStream primary, LocalStore.Staging copy, LocalStore.IOSupplier<FileStatus> status) {
      this.primary = primary;
      this.copy = copy;
      this.status = status;
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      primary.write(b, off, len);
      copy.write(b, off, len);
    }

    @Override
    public void flush() throws IOException {
      primary.flush();
    }

    @Override
    public void hflush() throws IOException {
      primary.hflush();
    }

    @Override
    public void hsync() throws IOException {
      primary.hsync();
    }

    @Override
    public boolean hasCapability(String capability) {
      return primary.hasCapability(capability);
    }

    @Override
    public AbortableResult abort() {
      closed = true;
      copy.abort();
      return primary.abort();
    }

    @Override
    public void close() throws IOException {
      if (closed) {
        return;
      }
      closed = true;
      try {
        primary.close();
      } catch (IOException | RuntimeException e) {
        copy.abort();
        throw e;
      }
      copy.commit(status);
    }
  }
}
