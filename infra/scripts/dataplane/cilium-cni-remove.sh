# Cilium's own cni-uninstall, for a node whose pod network is destroyed:
# its CNI configuration .ConfFile in .ConfDir and its plugin in .BinDir
# go, and the other networks' configurations it set aside (*.cilium_bak)
# come back, so a rebuilt node's runtime does not report a network no CNI
# serves. Prints nothing, and never fails: what it cannot remove is left
# as kubeadm reset leaves it.
conf={{q .ConfDir}}
rm -f "$conf"/{{q .ConfFile}} {{q .BinDir}}/cilium-cni || true
for f in "$conf"/*.cilium_bak; do
	if [ -e "$f" ]; then
		mv "$f" "${f%.cilium_bak}" || true
	fi
done
