#!/usr/bin/env bash
# Builds the pause binary of kubeadm's sandbox image from its C source in
# the k8s.io/kubernetes module (build/pause/linux/pause.c), statically, as
# Kubernetes' own image build does: the emulated homelab's real nodes run
# it as every pod's sandbox, and no registry on the Internet is reachable.
# Cached outside the repository, keyed by version. Prints the directory.
set -euo pipefail
version=${PAUSE_VERSION:-3.10.1}
kube=${KUBE_VERSION:-v1.34.4}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/pause-$version"
if [ -x "$out/pause" ]; then echo "$out"; exit 0; fi
dir=$(go mod download -json "k8s.io/kubernetes@$kube" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
src="$dir/build/pause/linux/pause.c"
[ -f "$src" ] || { echo "build-pause: no $src" >&2; exit 1; }
mkdir -p "$out"
# The flags of build/pause/Makefile.
gcc -Os -Wall -Werror -static -DVERSION="v$version-homelab" -o "$out/pause.tmp" "$src" >&2
mv "$out/pause.tmp" "$out/pause"
echo "$out"
