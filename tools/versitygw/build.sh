#!/usr/bin/env bash
# Builds the S3 server every tier, `make demo` and the real-node tier run (Versity S3 Gateway, Apache-2.0, its
# POSIX backend: objects are files, conditional writes and deletes honoured) once per machine into a cache
# keyed by its version, and prints the binary's path. The version is the S3 image's (images/s3/Dockerfile),
# so the host process and the quickstart's server are the same program.
set -euo pipefail

here="$(dirname "${BASH_SOURCE[0]}")"
version="$(sed -n 's/^ARG VERSITYGW_VERSION=//p' "$here/../../images/s3/Dockerfile")"
exec "$here/../go_install.sh" versitygw github.com/versity/versitygw/cmd/versitygw "${version:?not in images/s3/Dockerfile}"
