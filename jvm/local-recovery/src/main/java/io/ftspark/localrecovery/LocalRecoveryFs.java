package io.ftspark.localrecovery;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * The FileContext side ({@code fs.AbstractFileSystem.<scheme>.impl}). Spark's default CheckpointFileManager
 * writes, renames and reads state files through FileContext, whose S3A binding would create an S3AFileSystem
 * directly instead of the FileSystem configured in {@code fs.s3a.impl}.
 */
public class LocalRecoveryFs extends DelegateToFileSystem {
  public LocalRecoveryFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new LocalRecoveryFileSystem(), conf, uri.getScheme(), false);
  }
}
