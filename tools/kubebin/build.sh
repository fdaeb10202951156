#!/usr/bin/env bash
# Builds kubebin (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl in one binary) once per machine into a cache keyed by the pinned
# versions, and prints the directory that holds it and its symlinks.
# Re-running is cheap: an existing build is reused.
set -euo pipefail

K8S_VERSION=v1.34.12   # keep in step with go.mod (require + replace v0.34.12)
ETCD_VERSION=v3.6.4    # what k8s.io/apiserver v0.34.12 requires; see go.mod
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${FTSPARK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ftspark}"
# The sources are part of the key: an edit of main.go or go.mod builds again, whatever the versions say.
sources_hash="$(cd "$here" && cat main.go go.mod go.sum | sha256sum | cut -c1-12)"
out="$cache_root/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$sources_hash"
programs=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet kube-proxy)

mkdir -p "$cache_root/bin"
exec 9>"$out.lock"
flock 9  # one build at a time: a test run and `make demo` started together would share $out.tmp
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit=ftspark-kubebin -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

mkdir -p "$out.tmp"
echo ">> building kubebin $K8S_VERSION + etcd $ETCD_VERSION into $out (first time only; ~8 min on 2 cores)" >&2
cd "$here"
# go.sum pins every module hash; the public checksum database is not reachable from every machine.
export GOSUMDB="${GOSUMDB:-off}" GOFLAGS="${GOFLAGS:-} -mod=readonly"
start=$SECONDS
build=(go build -trimpath -ldflags "$ldflags" -o "$out.tmp/kubebin" .)
if [[ -x /usr/bin/time ]]; then  # GNU time: the largest process's peak memory (the linker, usually)
  build=(/usr/bin/time -f ">> go build: %e s wall, %M KiB peak RSS of its largest process" "${build[@]}")
fi
# go build is silent for minutes: say it is alive.
( while sleep 60; do echo ">> still building kubebin ($((SECONDS - start)) s)" >&2; done ) >/dev/null &
heartbeat=$!
trap 'kill "$heartbeat" 2>/dev/null || true' EXIT
"${build[@]}" >&2
for p in "${programs[@]}"; do ln -sf kubebin "$out.tmp/$p"; done
touch "$out.tmp/.complete"
rm -rf "$out" && mv "$out.tmp" "$out"
echo ">> built in $((SECONDS - start)) s: $out" >&2
echo "$out"
