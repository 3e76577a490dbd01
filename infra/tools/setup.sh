#!/usr/bin/env bash
# Installs what the tests and the emulated homelab need on a fresh Debian
# machine (root): the Debian packages of packages.txt, then kubeadm, the
# control-plane binaries, the kubelet, etcd, the Pulumi CLI and its Go
# language host built from their Go modules into a cache outside the
# repository, the lab's S3 server (versitygw), the real nodes' Debian root
# filesystem and the pause binary of their sandbox image. Two
# Kubernetes versions, each with the etcd its kubeadm deploys: the one the
# project runs (tools.go's KubernetesVersion, EtcdVersion) and the one
# `kubeadm upgrade` is tested against (UpgradeKubernetesVersion,
# UpgradeEtcdVersion).
# Safe to re-run: installed packages and cached binaries are reused.
# HOMELAB_REQUIRE_TOOLS=1 (CI) turns every missing piece into a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# packages.txt: "package command... # why", one package a line.
packages=()
commands=()
while read -r line; do
  line=${line%%#*}
  read -r -a words <<<"$line" || true
  [ ${#words[@]} -gt 0 ] || continue
  packages+=("${words[0]}")
  commands+=("${words[@]:1}")
done <"$here/packages.txt"

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install: ${missing[*]}" >&2; exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
absent=()
for c in "${commands[@]}"; do
  PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null || absent+=("$c")
done
if [ ${#absent[@]} -gt 0 ]; then
  echo "setup: installed, yet not on PATH: ${absent[*]} (infra/tools/packages.txt names the wrong package?)" >&2; exit 1
fi

# step NAME COMMAND...: runs a build, and says how long it took when that
# was more than a second (a cached step takes less), so a cold set-up
# shows where its time went.
step() {
  local name=$1 start=$SECONDS
  shift
  "$@" >/dev/null
  if (( SECONDS - start > 1 )); then
    echo "setup: $name took $(( SECONDS - start ))s" >&2
  fi
}
step "etcd" bash "$here/build-etcd.sh"
step "kubernetes" bash "$here/build-kube.sh"
step "etcd of the upgrade" env ETCD_VERSION=v3.6.6 bash "$here/build-etcd.sh"
step "kubernetes of the upgrade" env KUBE_VERSION=v1.35.4 bash "$here/build-kube.sh"
# The DNS addon's images of both versions (kubeadm config images list).
step "coredns" bash "$here/build-coredns.sh"
step "coredns of the upgrade" env COREDNS_VERSION=v1.13.1 bash "$here/build-coredns.sh"
step "the real nodes' Debian root" bash "$here/build-rootfs.sh"
step "the real nodes' distribution packages" bash "$here/build-distro-debs.sh"
step "pause" bash "$here/build-pause.sh"
step "containerd 2, for its configuration oracle and the lab's containerd.io" bash "$here/build-containerd.sh"
step "versitygw, the lab's S3 server" bash "$here/build-versitygw.sh"
start=$SECONDS
pulumi_dir=$(bash "$here/build-pulumi.sh")
if (( SECONDS - start > 1 )); then echo "setup: the Pulumi CLI took $(( SECONDS - start ))s" >&2; fi
step "the Pulumi Go language host" bash "$here/build-language-go.sh" "$pulumi_dir"
# Every module go.mod names, those no Linux build needs included: the Go
# language host lists them all whenever a Pulumi program starts (looking
# for plugins), and in the lab's namespaces, which have no way out, each
# one missing from the module cache printed a failed download into every
# `homelab-lab exec -- pulumi` command's output. Downloaded through a
# copy of go.mod, whose go.sum takes the hashes of the modules no build
# needs: written into the checkout's go.sum, they left it changed after
# README command 1, and a later `go mod tidy` removes them again.
step "the project's Go modules" bash -c 'tmp=$(mktemp -d) && cp "$1/go.mod" "$1/go.sum" "$tmp/" && cd "$1" && GOFLAGS="-modfile=$tmp/go.mod" go mod download all; rc=$?; rm -rf "$tmp"; exit "$rc"' _ "$here/../.."
echo "setup: $SECONDS s in all" >&2
echo "setup: ready (tools cached under ${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}/tools; for the Pulumi CLI: export PATH=$pulumi_dir:\$PATH)" >&2
