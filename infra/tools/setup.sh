#!/usr/bin/env bash
# Installs what the tests and the emulated homelab need on a fresh Debian
# machine (root): the Debian packages of packages.txt, then kubeadm, the
# control-plane binaries, the kubelet, etcd, the Pulumi CLI and its Go
# language host built from their Go modules into a cache outside the
# repository, the real nodes' Debian root filesystem and the pause binary
# of their sandbox image. Two
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

bash "$here/build-etcd.sh" >/dev/null
bash "$here/build-kube.sh" >/dev/null
ETCD_VERSION=v3.6.6 bash "$here/build-etcd.sh" >/dev/null
KUBE_VERSION=v1.35.4 bash "$here/build-kube.sh" >/dev/null
# The DNS addon's images of both versions (kubeadm config images list).
bash "$here/build-coredns.sh" >/dev/null
COREDNS_VERSION=v1.13.1 bash "$here/build-coredns.sh" >/dev/null
bash "$here/build-rootfs.sh" >/dev/null
bash "$here/build-pause.sh" >/dev/null
pulumi_dir=$(bash "$here/build-pulumi.sh")
bash "$here/build-language-go.sh" "$pulumi_dir" >/dev/null
echo "setup: ready (tools cached under ${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}/tools; for the Pulumi CLI: export PATH=$pulumi_dir:\$PATH)" >&2
