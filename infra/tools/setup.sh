#!/usr/bin/env bash
# Installs what the tests and the emulated homelab need on a fresh Debian
# machine (root): Debian packages, then kubeadm, the control-plane binaries
# etcd and the Pulumi CLI built from their Go modules into a cache outside the repository.
# Safe to re-run: installed packages and cached binaries are reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
packages=(keepalived openssh-server openssh-client iproute2 iptables curl util-linux)
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
bash "$here/build-etcd.sh" >/dev/null
bash "$here/build-kube.sh" >/dev/null
bash "$here/build-pulumi.sh" >/dev/null
echo "setup: ready (tools cached under ${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}/tools)" >&2
