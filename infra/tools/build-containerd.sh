#!/usr/bin/env bash
# Builds containerd 2.x from its Go module into a cache outside the
# repository, keyed by version: what roles/containerd's oracle tests check
# the rendered config version 3 with (`containerd config dump`), since no
# Debian 12 package carries containerd 2. Only the daemon is built.
# Prints the directory holding it.
set -euo pipefail
version=${CONTAINERD_VERSION:-v2.2.9}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/containerd-$version"
if [ -x "$out/containerd" ]; then echo "$out"; exit 0; fi
mkdir -p "$out.tmp"
echo "build-containerd: building containerd $version (a few minutes, once)" >&2
# The storage drivers needing C libraries are left out: the oracle reads
# configuration only.
GOBIN="$out.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" -tags "no_btrfs no_devmapper no_zfs" \
  "github.com/containerd/containerd/v2/cmd/containerd@$version" >&2
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
