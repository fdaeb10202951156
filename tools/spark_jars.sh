#!/usr/bin/env bash
# Fetches the S3A jars pyspark lacks (jvm/s3a-deps/pom.xml) from Maven Central into a cache directory outside
# the repo and prints that directory. Idempotent: a directory completed from the same pom (its sha256 in
# .complete) is reused as is; another pom fetches again. The directory's name is fixed: the runtime finds it
# by that name (ftspark.runtime.config.DEV_JARS_DIR_NAME).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$here/jvm/s3a-deps/pom.xml"
cache="${FTSPARK_CACHE:-$HOME/.cache/ftspark}"
# Named by the versions the pom pins (one place): a cache of another Spark line stays beside this one.
hadoop="$(sed -n 's|.*<hadoop.version>\(.*\)</hadoop.version>.*|\1|p' "$pom")"
aws_sdk="$(sed -n 's|.*<aws.sdk.version>\(.*\)</aws.sdk.version>.*|\1|p' "$pom")"
dir="$cache/jars/hadoop-aws-$hadoop-awssdk-$aws_sdk"
pom_sum="$(sha256sum "$pom" | cut -d' ' -f1)"

if [[ "$(cat "$dir/.complete" 2>/dev/null)" != "$pom_sum" ]]; then
  mkdir -p "$cache/jars"
  tmp="$(mktemp -d "$cache/jars/.partial.XXXXXX")"
  chmod 755 "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  # The repository under $HOME, where tools/images/build.sh mounts it for the image's offline Maven (Java's
  # own user.home follows the passwd entry, not $HOME).
  mvn -q -B -Dmaven.repo.local="$HOME/.m2/repository" -f "$pom" dependency:copy-dependencies \
    -DoutputDirectory="$tmp" >&2
  echo "$pom_sum" > "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir"
