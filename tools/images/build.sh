#!/usr/bin/env bash
# Builds the images without Docker: the Dockerfiles with buildah (chroot isolation: RUN steps use the host's
# network) on a Debian bookworm base made by mmdebstrap, and the pause image from images/pause/pause.c.
# Each is cached as an OCI archive in ${FTSPARK_CACHE:-~/.cache/ftspark}/images/<name>-<hash>/, keyed by a
# hash of everything that goes into it; a complete directory is reused as is. Prints one line per image on
# stdout, `<reference> <archive>` (`ctr -n k8s.io images import <archive>` names it docker.io/<reference>,
# the name the kubelet asks for), and build time and size on stderr.
# Usage: tools/images/build.sh [pause|operator|spark-py|s3|own-image ...]   (default: the first four, what an
# installation runs; own-image is the real-node tier's user-style image of the other Spark line)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cache="${FTSPARK_CACHE:-$HOME/.cache/ftspark}/images"
mirror="${FTSPARK_DEBIAN_MIRROR:-http://deb.debian.org}"
pip_cache="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
spark_version="$(tools/spark_line.sh pyspark)"
# The other Spark line (spark-lines.txt's last), which the user-style image runs.
other_line="$(tools/spark_line.sh lines | tail -n 1)"
operator_version="$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' helm/ftspark-operator/Chart.yaml)"

# The base both Dockerfiles get instead of python:3.11-slim-bookworm: what it has that they use (python3,
# python3-venv, ca-certificates), merged /usr, and slim images' dpkg excludes (later apt installs keep them).
base_recipe=(
  --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --include=python3,python3-venv,ca-certificates
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --aptopt='Acquire::Languages "none"'
  bookworm
)
base_mirrors=(
  "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main"
  "deb $mirror/debian-security bookworm-security main"
)

tools/host_packages.sh
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9  # one build at a time per cache
work="$(mktemp -d "$cache/.partial.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work"  # buildah's temporary files (it stages an archive there) stay in the cache, and go
store=(--root "$cache/store/root" --runroot "$cache/store/run" --storage-driver overlay)
buildah "${store[@]}" rm --all >/dev/null  # working containers an interrupted build left (and their mounts)

# The hash of stdin and of the files under the given repo paths (what .dockerignore leaves out excluded).
digest() {
  {
    cat
    if (($#)); then
      find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' \
        ! -path 'jvm/*/target/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    fi
  } | sha256sum | cut -c1-12
}

# cached NAME KEY BUILDER: sets dir to $cache/NAME-KEY, made by `BUILDER <new dir>` unless it is complete.
# Directories of earlier inputs go.
cached() {
  local target="$cache/$1-$2" new
  if [[ ! -f "$target/.complete" ]]; then
    new="$(mktemp -d "$work/new.XXXXXX")"
    "$3" "$new"
    touch "$new/.complete"
    rm -rf "$target"
    mv "$new" "$target"
    find "$cache" -maxdepth 1 -name "$1-*" ! -path "$target" -exec rm -rf {} +
  fi
  dir="$target"
}

make_base() {
  mmdebstrap "${base_recipe[@]}" "$1/rootfs.tar" "${base_mirrors[@]}" >"$work/mmdebstrap.log" 2>&1 ||
    { cat "$work/mmdebstrap.log" >&2 && return 1; }
}

# Sets base to the base image's reference, imported into the store from its cached root filesystem.
import_base() {
  local container
  cached base "$(printf '%s\n' "${base_recipe[@]}" "${base_mirrors[@]}" | digest)" make_base
  base="localhost/ftspark/base:${dir##*-}"
  buildah "${store[@]}" inspect --type image "$base" >/dev/null 2>&1 && return
  container="$(buildah "${store[@]}" from scratch)"
  buildah "${store[@]}" add "$container" "$dir/rootfs.tar" / >/dev/null
  buildah "${store[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash --created-by "mmdebstrap ${base_recipe[*]}" "$container"
  buildah "${store[@]}" commit --quiet --rm "$container" "$base" >/dev/null
  buildah "${store[@]}" images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/ftspark/base:' |
    { grep -vxF "$base" || true; } | xargs -r buildah "${store[@]}" rmi >/dev/null
}

# A Dockerfile build. Its cache mounts (RUN --mount=type=cache,id=X) are the host's pip cache and Maven
# repository: buildah 1.28 keeps the mount of id X in $TMPDIR/buildah-cache/X. The CA of the host's HTTPS
# proxy is a secret. Neither reaches the image.
bud() {
  import_base
  mkdir -p "$TMPDIR/buildah-cache" "$pip_cache" "$HOME/.m2"
  ln -sfn "$pip_cache" "$TMPDIR/buildah-cache/pip"
  ln -sfn "$HOME/.m2" "$TMPDIR/buildah-cache/m2"
  local args=(--isolation chroot --layers --force-rm --pull-never --tag "$reference")
  args+=(--build-arg "BASE_IMAGE=$base")
  if [[ -n "${PIP_CERT:-}" ]]; then
    args+=(--secret "id=ca,src=$PIP_CERT" --build-arg PIP_CERT=/run/secrets/ca)
  fi
  buildah "${store[@]}" bud "${args[@]}" "$@" "${context:-.}" >"$cache/$name.log" 2>&1 ||
    { tail -n 40 "$cache/$name.log" >&2 && echo "$name: the build failed, log: $cache/$name.log" >&2 && return 1; }
}

build_operator() { bud --file Dockerfile; }

build_spark() {
  # Maven in the build runs offline on the host's repository, which these fill (and test the jar).
  tools/spark_jars.sh >/dev/null
  tools/local_recovery_jar.sh >/dev/null
  bud --file images/spark-py/Dockerfile --build-arg MAVEN_FLAGS=--offline
}

# The user-style image of docs/own-image.md, on the other Spark line: images/spark-py/Dockerfile's `spark`
# stage of that line stands for the user's Spark image (Java, Spark, Python; nothing of ftspark's), and
# examples/own-image/Dockerfile adds the runtime to it from a context as the page lays it out.
build_own_image() {
  local spark_image="localhost/ftspark/spark:$(tools/spark_line.sh pyspark "$other_line")"
  reference="$spark_image" bud --file images/spark-py/Dockerfile --target spark \
    --build-arg "SPARK_LINE=$other_line"
  local context="$work/own-image" container mounted
  mkdir -p "$context/s3a" "$context/app"
  cp "$(tools/spark_jars.sh "$other_line")"/*.jar "$context/s3a/"
  cp constraints.txt "$context/"
  cp examples/windowed_counts.py "$context/app/"
  # ftspark's wheel, from the Spark image's own wheel stage (no Python of the host's needed).
  context=. reference=localhost/ftspark/wheel:latest bud --file images/spark-py/Dockerfile --target wheel
  container="$(buildah "${store[@]}" from --pull-never localhost/ftspark/wheel:latest)"
  mounted="$(buildah "${store[@]}" mount "$container")"
  cp "$mounted"/wheels/ftspark-*.whl "$context/"
  buildah "${store[@]}" umount "$container" >/dev/null
  buildah "${store[@]}" rm "$container" >/dev/null
  context="$context" bud --file "$PWD/examples/own-image/Dockerfile" --build-arg "SPARK_IMAGE=$spark_image"
}

# The s3 image's build stage gets the host's Go toolchain on the Debian base (no Go image is reachable here):
# GO_IMAGE, kept in the store by Go version. Its module and build caches are the host's, and its module
# proxy is that cache (the host's own build of the same version, tools/versitygw/build.sh, fills it), so the
# build needs no network.
build_s3() {
  local goroot go_version go_image container
  tools/versitygw/build.sh >/dev/null
  goroot="$(go env GOROOT)" go_version="$(go env GOVERSION)"
  import_base
  go_image="localhost/ftspark/go:${go_version#go}"
  if ! buildah "${store[@]}" inspect --type image "$go_image" >/dev/null 2>&1; then
    container="$(buildah "${store[@]}" from "$base")"
    buildah "${store[@]}" copy "$container" "$goroot" /usr/local/go >/dev/null
    buildah "${store[@]}" config --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env GOTOOLCHAIN=local "$container"
    buildah "${store[@]}" commit --quiet --rm "$container" "$go_image" >/dev/null
  fi
  mkdir -p "$TMPDIR/buildah-cache" "$(go env GOMODCACHE)" "$(go env GOCACHE)"
  ln -sfn "$(go env GOMODCACHE)" "$TMPDIR/buildah-cache/gomod"
  ln -sfn "$(go env GOCACHE)" "$TMPDIR/buildah-cache/gobuild"
  bud --file images/s3/Dockerfile --build-arg "GO_IMAGE=$go_image" \
    --build-arg GOPROXY=file:///go/pkg/mod/cache/download
}

build_pause() {
  local container
  gcc -static -Os -s -Wall -Wextra -Werror -o "$work/pause" images/pause/pause.c
  container="$(buildah "${store[@]}" from scratch)"
  buildah "${store[@]}" copy "$container" "$work/pause" /pause >/dev/null
  buildah "${store[@]}" config --entrypoint '["/pause"]' "$container"
  buildah "${store[@]}" commit --quiet --rm "$container" "$reference" >/dev/null
}

# Builds into the store and exports the archive. The store keeps every layer, those of the build stages too
# (the next build of changed code reuses them); removing $cache frees it all.
export_image() {
  local started=$SECONDS
  echo "$name: building $reference" >&2
  "$builder"
  buildah "${store[@]}" push --quiet "$reference" "oci-archive:$1/image.oci.tar:$reference" >&2
  echo "$name: built in $((SECONDS - started)) s," \
    "$(buildah "${store[@]}" images --format '{{.Size}}' "$reference") in the store" >&2
}

# image NAME BUILDER SHORT-REFERENCE INPUTS...: the archive of one image, built when its inputs changed
# (or key_extra, what else goes into it: the s3 image's Go version).
image() {
  local name="$1" builder="$2" short="$3" reference="docker.io/$3"
  shift 3
  # This script and the base's recipe go into every key: they are how the image is made.
  cached "$name" "$(printf '%s\n' "$short" "${base_recipe[@]}" "${base_mirrors[@]}" "${key_extra:-}" |
    digest tools/images/build.sh "$@")" export_image
  echo "$name: $(du -h "$dir/image.oci.tar" | cut -f1) archive" >&2
  echo "$short $dir/image.oci.tar"
}

names=("$@")
((${#names[@]})) || names=(pause operator spark-py s3)
for name in "${names[@]}"; do
  case "$name" in
    pause) image pause build_pause ftspark/pause:1.0 images/pause/pause.c ;;
    operator)
      image operator build_operator "ftspark/operator:$operator_version" \
        Dockerfile .dockerignore constraints.txt pyproject.toml README.md operator
      ;;
    spark-py)
      image spark-py build_spark "ftspark/spark-py:$spark_version" \
        images/spark-py/Dockerfile .dockerignore constraints.txt pyproject.toml README.md operator jvm \
        examples/*.py spark-lines.txt tools/spark_line.sh
      ;;
    own-image)
      image own-image build_own_image "ftspark/own-image:$(tools/spark_line.sh pyspark "$other_line")" \
        images/spark-py/Dockerfile examples/own-image/Dockerfile .dockerignore constraints.txt pyproject.toml \
        README.md operator jvm/s3a-deps examples/windowed_counts.py spark-lines.txt tools/spark_line.sh
      ;;
    s3)
      key_extra="$(go env GOVERSION)" image s3 build_s3 "ftspark/s3:$(sed -n 's/^ARG VERSITYGW_VERSION=//p' images/s3/Dockerfile)" \
        images/s3/Dockerfile
      ;;
    *) echo "unknown image $name (pause, operator, spark-py, own-image, s3)" >&2 && exit 2 ;;
  esac
done
