package io.ftspark.localrecovery;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

/**
 * Counters of one JVM (all wrapper instances together: FileContext creates a new one per checkpoint manager).
 * Read them through py4j ({@code jvm.io.ftspark.localrecovery.LocalRecoveryStats.json()}), or from the file
 * {@code <local dir>/_stats/<host>-<pid>.json} that every JVM with a local dir rewrites at most once a second
 * while it works and when its FileSystem closes. The host name is a pod's name in a container, where pids start
 * at 1 in every pod: the name alone would let one executor's file replace another's. Byte counts are of
 * tracked state files only.
 */
public final class LocalRecoveryStats {
  enum Counter {
    /** Opens served from a verified local copy. */
    localHits,
    /** Opens that found no local copy. */
    localMisses,
    /** Local copies whose own SHA-256 or length did not match their record (a crash, or changed bytes). */
    localCorrupt,
    /** Local copies whose record has no valid MAC under the job's key (forged, or another key's): never served. */
    localRejected,
    /** Local copies of an older primary (size or ETag/modification time changed). */
    localStale,
    /** Local copies that could not be written (disk full, IO error); the primary was unaffected. */
    localWriteFailures,
    localFilesWritten,
    localBytesWritten,
    /** Time spent writing local copies (on the write path: what a checkpoint pays extra). */
    localWriteNanos,
    localFilesPruned,
    bytesReadLocal,
    bytesReadPrimary,
  }

  private static final long WRITE_INTERVAL_MS = 1000;
  private static final Map<Counter, AtomicLong> COUNTERS = new LinkedHashMap<>();
  private static final AtomicLong lastWrite = new AtomicLong();
  private static final String FILE_NAME = hostName() + "-" + ProcessHandle.current().pid() + ".json";

  static {
    for (Counter c : Counter.values()) {
      COUNTERS.put(c, new AtomicLong());
    }
  }

  private LocalRecoveryStats() {}

  static void add(Counter counter, long delta) {
    COUNTERS.get(counter).addAndGet(delta);
  }

  public static Map<String, Long> snapshot() {
    Map<String, Long> values = new LinkedHashMap<>();
    COUNTERS.forEach((counter, value) -> values.put(counter.name(), value.get()));
    return values;
  }

  public static String json() {
    return snapshot().entrySet().stream()
        .map(e -> "\"" + e.getKey() + "\": " + e.getValue())
        .collect(Collectors.joining(", ", "{", "}"));
  }

  /** Rewrites the stats file if the last write is older than a second (or always, when forced). */
  static void writeTo(Path root, boolean force) {
    long now = System.currentTimeMillis();
    long last = lastWrite.get();
    if (!force && (now - last < WRITE_INTERVAL_MS || !lastWrite.compareAndSet(last, now))) {
      return;
    }
    lastWrite.set(now);
    try {
      Path dir = Files.createDirectories(root.resolve("_stats"));
      Path temp = dir.resolve("." + FILE_NAME + "." + Thread.currentThread().getId());
      Files.write(temp, json().getBytes(StandardCharsets.UTF_8));
      Files.move(temp, dir.resolve(FILE_NAME), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException | RuntimeException e) {
      // Statistics never fail an operation; a broken local dir shows in localWriteFailures already.
    }
  }

  /** The kernel's host name (no DNS lookup, which may hang where there is no resolver), or "host". */
  static String hostName() {
    try {
      String name = Files.readString(Path.of("/proc/sys/kernel/hostname"), StandardCharsets.UTF_8).trim();
      return name.isEmpty() || name.contains("/") ? "host" : name;
    } catch (IOException | RuntimeException e) {
      return "host";
    }
  }
}
