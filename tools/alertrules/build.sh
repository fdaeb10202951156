#!/usr/bin/env bash
# Builds tools/alertrules (the chart's alert rule tests, on Prometheus's own rule manager and PromQL engine)
# once per machine into a cache keyed by its sources, and prints the binary's path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${FTSPARK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ftspark}"
sources_hash="$(cd "$here" && cat main.go go.mod go.sum | sha256sum | cut -c1-12)"
out="$cache_root/bin/alertrules-$sources_hash"

mkdir -p "$cache_root/bin"
exec 9>"$out.lock"
flock 9  # one build at a time: two runs started together would share $out.tmp
if [[ ! -x "$out/alertrules" ]]; then
  echo ">> building alertrules into $out (first time only; about a minute)" >&2
  mkdir -p "$out.tmp"
  # go.sum pins every module hash; the public checksum database is not reachable from every machine.
  (cd "$here" && GOSUMDB="${GOSUMDB:-off}" GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w" -o "$out.tmp/alertrules" .) >&2
  rm -rf "$out" && mv "$out.tmp" "$out"  # whole or not at all: an interrupted build is not taken for one
fi
echo "$out/alertrules"
