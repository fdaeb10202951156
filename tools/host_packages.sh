#!/usr/bin/env bash
# Installs the Debian packages that `make images` and the real-node tier use, if any is missing: buildah and
# mmdebstrap build the images, gcc and libc6-dev the static pause binary; containerd, runc, the CNI plugins,
# iptables and conntrack run real nodes; iproute2 and nftables set up and undo their network
# (tools/ftspark_dev/realnodes). Idempotent; one dpkg-query when everything is there.
set -euo pipefail

packages=(buildah mmdebstrap gcc libc6-dev containerd runc containernetworking-plugins iptables conntrack nftables
  iproute2)
mapfile -t installed < <(dpkg-query -W -f '${db:Status-Status} ${Package}\n' "${packages[@]}" 2>/dev/null |
  sed -n 's/^installed //p')
missing=()
for package in "${packages[@]}"; do
  [[ " ${installed[*]} " == *" $package "* ]] || missing+=("$package")
done
((${#missing[@]})) || exit 0
if [[ "$(id -u)" != 0 ]]; then
  echo "missing Debian packages: ${missing[*]} (run this as root, or apt-get install them)" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
