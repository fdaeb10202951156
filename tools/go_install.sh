#!/usr/bin/env bash
# Builds a Go command at a pinned version once per machine, into a cache keyed by its name and version, and
# prints the binary's path. Usage: tools/go_install.sh NAME PACKAGE VERSION [LDFLAGS]
# (tools/helm/build.sh and tools/versitygw/build.sh name what they pin).
set -euo pipefail

name="$1" package="$2" version="$3" ldflags="${4:--s -w}"
cache_root="${FTSPARK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ftspark}"
out="$cache_root/bin/$name-$version"

mkdir -p "$cache_root/bin"
exec 9>"$out.lock"
flock 9  # one build at a time: `make -j2` may ask twice at once (s3-bin, and the s3 image's build)
if [[ ! -x "$out/$name" ]]; then
  echo ">> building $name $version into $out (first time only; a few minutes)" >&2
  mkdir -p "$out.tmp"
  # GOSUMDB: `go install pkg@version` verifies every dependency against the module's own go.sum; the public
  # checksum database, which would also vouch for the module itself, is not always reachable from here.
  GOBIN="$out.tmp" GOSUMDB="${GOSUMDB:-off}" GOFLAGS=-trimpath CGO_ENABLED=0 \
    go install -ldflags "$ldflags" "$package@$version" >&2
  rm -rf "$out" && mv "$out.tmp" "$out"  # whole or not at all: an interrupted build is not taken for one
fi
echo "$out/$name"
