#!/usr/bin/env bash
# Builds CoreDNS from its Go module (kubeadm's DNS addon; no prebuilt image
# reaches these machines) into a cache outside the repository, keyed by
# version: the lab's registry serves it as the coredns image of the
# Kubernetes versions that name it. Prints the directory holding it.
set -euo pipefail
version=${COREDNS_VERSION:-v1.12.1}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/coredns-$version"
if [ -x "$out/coredns" ]; then echo "$out"; exit 0; fi
work="$cache/build/coredns-$version"
mkdir -p "$work" "$out"
cd "$work"
if [ ! -f go.mod ] || ! grep -q "coredns/coredns $version" go.mod; then
  rm -f go.mod go.sum
  go mod init homelab.local/corednsbuild >/dev/null 2>&1
  echo "build-coredns: resolving modules for CoreDNS $version" >&2
  # A main package cannot be imported by a tools.go: go get records the
  # module and every sum its build needs.
  go get "github.com/coredns/coredns@$version" >&2
fi
echo "build-coredns: building CoreDNS $version (first time only, ~4 min on 2 cores)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/coredns.tmp" github.com/coredns/coredns >&2
mv "$out/coredns.tmp" "$out/coredns"
echo "$out"
