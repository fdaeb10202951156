package io.ftspark.localrecovery;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.Path;

/**
 * Which checkpoint files get a node-local copy: the state store files Spark 4.0 never rewrites in place, inside a
 * state partition directory {@code <checkpoint>/state/<operatorId>/<partitionId>[/<storeName>]}.
 *
 * <ul>
 *   <li>RocksDB provider (RocksDBFileManager): {@code SSTs/<n>-<uuid>.sst}, {@code logs/<n>-<uuid>.log} (unique
 *       names), {@code <version>[_<id>].zip} and {@code <version>[_<id>].changelog};
 *   <li>HDFS provider: {@code <version>[_<id>].delta} and {@code <version>[_<id>].snapshot}.
 * </ul>
 *
 * Versioned files are rewritten when a batch runs again, so a local copy is only ever served if it matches the
 * primary's current size and identity (ETag or modification time). offsets/, commits/, sources/ and metadata
 * never qualify: they are tiny and some are rewritten. Spark's CheckpointFileManager writes versioned files to
 * {@code .<name>.<uuid>[.TID<task>].tmp} and renames them, so those temporary names qualify too.
 */
final class StateFiles {
  private static final Pattern SPARK_TEMP = Pattern.compile("^\\.(.+)\\.[0-9a-fA-F-]{36}(\\.TID\\d+)?\\.tmp$");

  private StateFiles() {}

  static boolean isTracked(Path path) {
    Path parent = path.getParent();
    if (parent == null) {
      return false;
    }
    String name = path.getName();
    Matcher temp = SPARK_TEMP.matcher(name);
    if (temp.matches()) {
      name = temp.group(1);
    }
    boolean immutable =
        name.endsWith(".zip")
            || name.endsWith(".changelog")
            || name.endsWith(".delta")
            || name.endsWith(".snapshot")
            || (name.endsWith(".sst") && parent.getName().equals("SSTs"))
            || (name.endsWith(".log") && parent.getName().equals("logs"));
    return immutable && inStatePartition(parent);
  }

  /** Spark's own temporary name: its content is renamed to the final name, never read under this one. */
  static boolean isSparkTemp(Path path) {
    return SPARK_TEMP.matcher(path.getName()).matches();
  }

  /** {@code .<temp>.crc}: the checksum sidecar a ChecksumFileSystem would keep beside a Spark temporary file. */
  static boolean isChecksumOfSparkTemp(Path path) {
    String name = path.getName();
    return name.length() > 5
        && name.startsWith(".")
        && name.endsWith(".crc")
        && SPARK_TEMP.matcher(name.substring(1, name.length() - 4)).matches();
  }

  private static boolean inStatePartition(Path dir) {
    for (Path p = dir; p.getParent() != null && p.getParent().getParent() != null; p = p.getParent()) {
      Path operator = p.getParent();
      if (isNumber(p.getName()) && isNumber(operator.getName()) && operator.getParent().getName().equals("state")) {
        return true;
      }
    }
    return false;
  }

  private static boolean isNumber(String s) {
    return !s.isEmpty() && s.chars().allMatch(Character::isDigit);
  }
}
