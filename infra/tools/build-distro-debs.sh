#!/usr/bin/env bash
# Downloads the Debian packages homelab installs from a node's distribution
# for the emulated homelab's distribution repository: the container runtime
# the real nodes' rootfs holds (containerd and runc, at exactly its
# versions; cluster.containerRuntime.packages) and rclone, the uploader of
# the off-site etcd snapshots (cluster.etcd.snapshots.s3; Debian 12's, not
# in the rootfs). A lab node installs them from there, as a homelab machine
# does from Debian's mirror. Never installed on this machine: a node's /usr
# starts as the machine's, and would hide a missing install.
# Cached outside the repository, keyed by the versions. Prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rootfs=$(bash "$here/build-rootfs.sh" | tail -n 1)
pins=()
for p in containerd runc; do
  v=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' "$p")
  pins+=("$p=$v")
done
# Debian 12's own rclone, as apt on a node would pick it.
v=$(apt-cache show --no-all-versions rclone | sed -n 's/^Version: //p' | head -n 1)
[ -n "$v" ] || { echo "apt knows no rclone package: is Debian's main suite in this machine's sources?" >&2; exit 1; }
pins+=("rclone=$v")
key=$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-12)
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/distro-debs-$key"
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
