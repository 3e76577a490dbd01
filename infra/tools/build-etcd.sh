#!/usr/bin/env bash
# Builds etcd and etcdctl from their Go modules into a cache outside the
# repository, keyed by version (Debian's etcd 3.4 is too old for kube-apiserver
# 1.34). Prints the directory holding the binaries.
set -euo pipefail
version=${ETCD_VERSION:-v3.6.5}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/etcd-$version"
if [ -x "$out/etcd" ] && [ -x "$out/etcdctl" ]; then echo "$out"; exit 0; fi
work="$cache/build/etcd-$version"
mkdir -p "$work" "$out"
cd "$work"
if [ ! -f go.mod ] || ! grep -q "server/v3 $version" go.mod; then
  rm -f go.mod go.sum
  go mod init homelab.local/etcdbuild >/dev/null 2>&1
  printf 'require (\n\tgo.etcd.io/etcd/server/v3 %s\n\tgo.etcd.io/etcd/etcdctl/v3 %s\n)\n' "$version" "$version" >> go.mod
  cat > tools.go <<GO
//go:build tools
package tools
import (
	_ "go.etcd.io/etcd/server/v3"
	_ "go.etcd.io/etcd/etcdctl/v3"
)
GO
  echo "build-etcd: resolving modules for etcd $version" >&2
  go mod tidy >&2
fi
echo "build-etcd: building etcd $version (~1 min)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcdctl.tmp" go.etcd.io/etcd/etcdctl/v3 >&2
mv "$out/etcd.tmp" "$out/etcd"; mv "$out/etcdctl.tmp" "$out/etcdctl"
echo "$out"
