#!/usr/bin/env bash
# Downloads the Debian packages of the container runtime the real nodes'
# rootfs holds (containerd and runc, at exactly its versions) from this
# machine's own apt source, for the emulated homelab's distribution
# repository: a lab node that lacks them installs them from there, as a
# homelab machine does from Debian's mirror (cluster.containerRuntime.packages).
# Cached outside the repository, keyed by the versions. Prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rootfs=$(bash "$here/build-rootfs.sh" | tail -n 1)
pkgs=(containerd runc)
pins=()
for p in "${pkgs[@]}"; do
  v=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' "$p")
  pins+=("$p=$v")
done
key=$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-12)
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/runtime-debs-$key"
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
# apt's sandbox user cannot write to root's cache; the download is as root.
(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "${pins[@]}" >&2)
printf '%s\n' "${pins[@]}" > "$tmp/pins"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
