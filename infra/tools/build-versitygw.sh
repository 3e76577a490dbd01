#!/usr/bin/env bash
# Builds the Versity S3 Gateway (versitygw, Apache-2.0) from its Go module
# into a cache outside the repository, keyed by version: the lab's
# S3-compatible server, which keeps a bucket as a plain directory (its
# posix backend) in the gateway namespace, where the Pulumi state and the
# etcd snapshots' off-site copies go (docs/state.md). No Debian 12 package
# serves S3. Prints the directory holding it.
set -euo pipefail
version=${VERSITYGW_VERSION:-v1.8.0}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/versitygw-$version"
if [ -x "$out/versitygw" ]; then echo "$out"; exit 0; fi
mkdir -p "$out.tmp"
echo "build-versitygw: building versitygw $version (about two minutes, once)" >&2
GOBIN="$out.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
  "github.com/versity/versitygw/cmd/versitygw@$version" >&2
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
