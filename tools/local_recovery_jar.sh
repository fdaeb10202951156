#!/usr/bin/env bash
# Builds the task-local recovery jar (jvm/local-recovery, JUnit tests included) against the default Spark
# line's Hadoop and slf4j (spark-lines.txt) into a cache directory outside the repo, keyed by version and a
# hash of its sources and those versions, and prints the jar's path. Idempotent: a complete
# directory is reused as is. Maven's repository (~/.m2) is the download cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$here/jvm/local-recovery"
cache="${FTSPARK_CACHE:-$HOME/.cache/ftspark}"
version="$(sed -n 's:^  <version>\(.*\)</version>$:\1:p' "$src/pom.xml")"
read -ra versions <<<"$("$here/tools/spark_line.sh" maven)"
hash="$({ cd "$src" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum && echo "${versions[*]}"; } |
  sha256sum | cut -c1-12)"
dir="$cache/jars/local-recovery-$version-$hash"
jar="$dir/ftspark-local-recovery-$version.jar"

if [[ ! -f "$dir/.complete" ]]; then
  mkdir -p "$cache/jars"
  tmp="$(mktemp -d "$cache/jars/.partial.XXXXXX")"
  chmod 755 "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  # The repository under $HOME, as tools/spark_jars.sh says.
  mvn -q -B -Dmaven.repo.local="$HOME/.m2/repository" -f "$src/pom.xml" "${versions[@]}" -Dftspark.build.dir="$tmp/build" \
    package >&2
  mv "$tmp/build/ftspark-local-recovery-$version.jar" "$tmp/"
  rm -rf "$tmp/build"
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$jar"
