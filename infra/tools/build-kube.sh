#!/usr/bin/env bash
# Builds kubeadm, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, the kubelet and kube-proxy from the k8s.io/kubernetes Go module (no prebuilt downloads reach
# these machines) into a cache outside the repository, keyed by version.
# Prints the directory holding the binaries. Reuses a complete cache.
set -euo pipefail
version=${KUBE_VERSION:-v1.34.4}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/kubernetes-$version"
bins=(kubeadm kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
want=${KUBE_BINS:-${bins[*]}}

missing=()
for b in $want; do [ -x "$out/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$out"; exit 0; fi

minor=${version#v1.}; minor=${minor%%.*}
staging="v0.${version#v1.}"
work="$cache/build/kubernetes-$version"
mkdir -p "$work" "$out"
cd "$work"
# A tools.go from before a binary was added lacks that binary's modules.
if [ ! -f go.mod ] || ! grep -q "k8s.io/kubernetes $version" go.mod || ! grep -q 'cmd/kube-proxy"' tools.go 2>/dev/null; then
  rm -f go.mod go.sum
  go mod init homelab.local/kubebuild >/dev/null 2>&1
  # The staging modules kubernetes replaces with ./staging/src/... must be
  # pinned to their published versions, or nothing resolves.
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "require k8s.io/kubernetes $version"
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#replace \1 => \1 '"$staging"'#p' "$gomod"
  } >> go.mod
  cat > tools.go <<GO
//go:build tools
package tools
import (
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  echo "build-kube: resolving modules for kubernetes $version" >&2
  go mod tidy >&2
fi
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.gitCommit=homelab-build -X $p.buildDate=$date"
done
# One go build for every missing binary: the go command schedules their
# packages and links together, so no core waits while another binary's
# link runs alone, as it did with one invocation per binary. The binaries
# land in a fresh directory and move into the cache one by one, each
# whole.
pkgs=()
for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
echo "build-kube: building ${missing[*]} $version (first time only; about 10 min on 2 cores)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$tmp/" "${pkgs[@]}" >&2
for b in "${missing[@]}"; do mv "$tmp/$b" "$out/$b"; done
echo "$out"
