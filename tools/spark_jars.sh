#!/usr/bin/env bash
# Fetches the S3A jars pyspark lacks (jvm/s3a-deps/pom.xml, at a Spark line's versions: spark-lines.txt) from
# Maven Central into a cache directory outside the repo and prints that directory. Idempotent: a directory
# completed from the same pom and versions (their sha256 in .complete) is reused as is. The default line's
# directory name is fixed: the runtime finds it by that name (ftspark.runtime.config.DEV_JARS_DIR_NAME).
# Usage: tools/spark_jars.sh [LINE]   (default: the default line)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$here/jvm/s3a-deps/pom.xml"
cache="${FTSPARK_CACHE:-$HOME/.cache/ftspark}"
# Named by the line's versions: a cache of another Spark line stays beside this one.
read -ra versions <<<"$("$here/tools/spark_line.sh" maven "${1:-}")"
dir="$cache/jars/$("$here/tools/spark_line.sh" jars-dir "${1:-}")"
pom_sum="$({ cat "$pom" && echo "${versions[*]}"; } | sha256sum | cut -d' ' -f1)"

if [[ "$(cat "$dir/.complete" 2>/dev/null)" != "$pom_sum" ]]; then
  mkdir -p "$cache/jars"
  tmp="$(mktemp -d "$cache/jars/.partial.XXXXXX")"
  chmod 755 "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  # The repository under $HOME, where tools/images/build.sh mounts it for the image's offline Maven (Java's
  # own user.home follows the passwd entry, not $HOME).
  mvn -q -B -Dmaven.repo.local="$HOME/.m2/repository" -f "$pom" "${versions[@]}" dependency:copy-dependencies \
    -DoutputDirectory="$tmp" >&2
  echo "$pom_sum" > "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir"
