package io.ftspark.localrecovery;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.EnumSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileSystem;
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
 * <p>Over S3A it also spares Spark's checkpoint writes the probes FileContext makes on top of S3A's own.
 * Spark writes every checkpoint file (offsets, commits, source logs, state) to a temporary name and renames
 * it. FileContext probes the new file's parent before the create, and the source, the destination and the
 * destination's parent before the rename; S3A's rename then probes the source and the destination again.
 * Each probe of a missing path on S3 is a HEAD and a LIST: 120 requests for a micro-batch that writes 5
 * files, 60 without these probes (docs/local-recovery.md, "Fewer requests per checkpoint file").
 */
public class LocalRecoveryFs extends DelegateToFileSystem {
  private static final String S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem";

  private final boolean primaryIsS3A;

  public LocalRecoveryFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new LocalRecoveryFileSystem(), conf, uri.getScheme(), false);
    primaryIsS3A = isS3A(((FilterFileSystem) fsImpl).getRawFileSystem());
  }

  private static boolean isS3A(FileSystem primary) {
    for (Class<?> c = primary.getClass(); c != null; c = c.getSuperclass()) {
      if (c.getName().equals(S3A)) {
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
    return super.createInternal(f, flag, absolutePermission, bufferSize, replication, blockSize, progress,
        checksumOpt, createParent || primaryIsS3A);
  }

  /**
   * S3A's rename refuses an existing destination itself (FileAlreadyExistsException), so FileContext's own
   * probes are left out there; an overwrite deletes the destination and renames again, as FileContext does.
   * Any other primary gets FileContext's checks.
   */
  @Override
  public void renameInternal(Path src, Path dst, boolean overwrite) throws IOException {
    if (!primaryIsS3A) {
      super.renameInternal(src, dst, overwrite);
      return;
    }
    checkPath(src);
    checkPath(dst);
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
