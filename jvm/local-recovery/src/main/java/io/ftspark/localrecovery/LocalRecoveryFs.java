package io.ftspark.localrecovery;

import java.io.BufferedOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.util.EnumSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FilterFileSystem;
import org.apache.hadoop.fs.Options.ChecksumOpt;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * The FileContext side ({@code fs.AbstractFileSystem.<scheme>.impl}). Spark's default CheckpointFileManager
 * writes, renames and reads state files through FileContext, whose S3A binding would create an S3AFileSystem
 * directly instead of the FileSystem configured in {@code fs.s3a.impl}.
 *
 * <p>Over S3A it also spares Spark's checkpoint writes most of their requests. Spark writes every checkpoint
 * file (offsets, commits, source logs, state) to a temporary name and renames it. FileContext probes the new
 * file's parent before the create, and the source, the destination and the destination's parent before the
 * rename; S3A's rename then probes the source and the destination again, copies and deletes. Each probe of a
 * missing path on S3 is a HEAD and a LIST: 120 requests for a micro-batch that writes 5 files.
 *
 * <p>So over S3A a Spark temporary file ({@link StateFiles#isSparkTemp}) is held on local disk, never sent,
 * and its rename is the one PUT of the final name: conditional on no object being there (If-None-Match, which
 * also makes the refusal atomic) unless it may overwrite. A temporary file deleted instead (Spark's cancel)
 * costs no request. Any other file goes through as FileContext would send it, without the probes S3A makes
 * anyway; any other primary gets FileContext's own checks (docs/local-recovery.md, "Fewer requests per
 * checkpoint file").
 */
public class LocalRecoveryFs extends DelegateToFileSystem {
  private static final String S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem";

  /**
   * Held temporary files by their qualified name. Static: Spark may rename through another FileContext than
   * the one it created with, and the names carry a UUID.
   */
  private static final ConcurrentHashMap<Path, java.nio.file.Path> HELD = new ConcurrentHashMap<>();

  private final boolean primaryIsS3A;

  public LocalRecoveryFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new LocalRecoveryFileSystem(), conf, uri.getScheme(), false);
    primaryIsS3A = isA(((FilterFileSystem) fsImpl).getRawFileSystem(), S3A);
  }

  /** By name: hadoop-aws is not on the compile classpath. */
  static boolean isA(Object object, String className) {
    for (Class<?> c = object.getClass(); c != null; c = c.getSuperclass()) {
      if (c.getName().equals(className)) {
        return true;
      }
    }
    return false;
  }

  /** An object store has no directories to miss: S3A creates under any prefix, as its FileSystem does. */
  @Override
  public FSDataOutputStream createInternal(Path f, EnumSet<CreateFlag> flag, FsPermission absolutePermission,
      int bufferSize, short replication, long blockSize, Progressable progress, ChecksumOpt checksumOpt,
      boolean createParent) throws IOException {
    if (primaryIsS3A && StateFiles.isSparkTemp(f)) {
      return hold(makeQualified(f));
    }
    return super.createInternal(f, flag, absolutePermission, bufferSize, replication, blockSize, progress,
        checksumOpt, createParent || primaryIsS3A);
  }

  /** In the JVM's temporary directory: Spark's pods have it writable (an emptyDir under a read-only root). */
  private static FSDataOutputStream hold(Path temp) throws IOException {
    java.nio.file.Path file = Files.createTempFile("ftspark-held-", ".tmp");
    java.nio.file.Path replaced = HELD.put(temp, file);
    if (replaced != null) {
      Files.deleteIfExists(replaced);
    }
    return new FSDataOutputStream(new BufferedOutputStream(Files.newOutputStream(file), 64 * 1024), null);
  }

  /** A held file exists with the bytes written so far, as an uploaded one would. */
  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    if (primaryIsS3A) {
      Path path = makeQualified(f);
      java.nio.file.Path held = HELD.get(path);
      if (held != null) {
        return new FileStatus(Files.size(held), false, 1, fsImpl.getDefaultBlockSize(path),
            Files.getLastModifiedTime(held).toMillis(), path);
      }
      // Spark probes for a checksum sidecar after each rename (HADOOP-16255): S3A never writes one.
      if (StateFiles.isChecksumOfSparkTemp(path)) {
        throw new FileNotFoundException(path + " (S3A writes no checksum files)");
      }
    }
    return super.getFileStatus(f);
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    java.nio.file.Path held = HELD.remove(makeQualified(f));
    if (held != null) {
      Files.deleteIfExists(held);
      return true;
    }
    return super.delete(f, recursive);
  }

  /**
   * A held file becomes one PUT of the destination. Otherwise S3A's rename refuses an existing destination
   * itself (FileAlreadyExistsException), so FileContext's own probes are left out there; an overwrite deletes
   * the destination and renames again, as FileContext does. Any other primary gets FileContext's checks.
   */
  @Override
  public void renameInternal(Path src, Path dst, boolean overwrite) throws IOException {
    if (!primaryIsS3A) {
      super.renameInternal(src, dst, overwrite);
      return;
    }
    checkPath(src);
    checkPath(dst);
    Path from = makeQualified(src);
    java.nio.file.Path held = HELD.get(from);
    if (held != null) {
      // A refused destination leaves the file held: the caller may still delete it or overwrite.
      ((LocalRecoveryFileSystem) fsImpl).put(held, makeQualified(dst), overwrite);
      if (HELD.remove(from, held)) {
        Files.deleteIfExists(held);
      }
      return;
    }
    try {
      renameOnce(src, dst);
    } catch (FileAlreadyExistsException e) {
      if (!overwrite) {
        throw e;
      }
      fsImpl.delete(dst, false);
      renameOnce(src, dst);
    }
  }

  private void renameOnce(Path src, Path dst) throws IOException {
    if (!fsImpl.rename(src, dst)) {
      throw new IOException("Failed to rename " + src + " to " + dst);
    }
  }
}
