#!/usr/bin/env bash
# Builds Helm once per machine into a cache keyed by its version and prints the binary's path.
set -euo pipefail

HELM_VERSION=v3.21.4
exec "$(dirname "${BASH_SOURCE[0]}")/../go_install.sh" helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
