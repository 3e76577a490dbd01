#!/usr/bin/env bash
# Builds containerd 2.x from its Go module into a cache outside the
# repository, keyed by version, since no Debian 12 package carries
# containerd 2: the daemon, what roles/containerd's oracle tests check the
# rendered config version 3 with (`containerd config dump`), and with its
# runc shim and ctr, what the lab's stand-in for Docker's containerd.io
# package carries. Prints the directory holding them.
set -euo pipefail
version=${CONTAINERD_VERSION:-v2.2.9}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/containerd-$version"
bins=(containerd containerd-shim-runc-v2 ctr)
complete=1
for b in "${bins[@]}"; do [ -x "$out/$b" ] || complete=0; done
if [ "$complete" = 1 ]; then echo "$out"; exit 0; fi
mkdir -p "$out.tmp"
echo "build-containerd: building containerd $version (a few minutes, once)" >&2
# The storage drivers needing C libraries are left out: the lab's nodes
# use overlayfs. Static, as containerd's own release builds the shim.
pkgs=()
for b in "${bins[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$version"); done
GOBIN="$out.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" -tags "no_btrfs no_devmapper no_zfs" \
  "${pkgs[@]}" >&2
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
