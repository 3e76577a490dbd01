# homelab: dataplane/cilium-cni-remove
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Cilium's own cni-uninstall, for a node whose pod network is destroyed:
# its CNI configuration .ConfFile in .ConfDir and its plugin in .BinDir
# go, and the other networks' configurations it set aside (*.cilium_bak)
# come back, so a rebuilt node's runtime does not report a network no CNI
# serves. Prints nothing, and never fails: what it cannot remove is left
# as kubeadm reset leaves it.
conf='/etc/cni/net.d'
rm -f "$conf"/'05-cilium.conflist' '/opt/cni/bin'/cilium-cni || true
for f in "$conf"/*.cilium_bak; do
	if [ -e "$f" ]; then
		mv "$f" "${f%.cilium_bak}" || true
	fi
done
