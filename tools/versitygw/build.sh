#!/usr/bin/env bash
# Builds the S3 server every tier, `make demo` and the real-node tier run (Versity S3 Gateway, Apache-2.0, its
# POSIX backend: objects are files, conditional writes and deletes honoured) once per machine into a cache
# keyed by its version, and prints the binary's path.
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
exec "$(dirname "${BASH_SOURCE[0]}")/../go_install.sh" versitygw github.com/versity/versitygw/cmd/versitygw \
  "$VERSITYGW_VERSION"
