# homelab: dataplane/kube-rules-check
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# What kube-proxy left on this node once Cilium replaces it, one kind a
# line: "iptables N" / "ip6tables N" (N rules and chains named KUBE-*, the
# kubelet's own chains .Keep not counted), "nft ip" / "nft ip6" (its
# nftables tables), "ipvs" (its dummy interface). Prints nothing on a
# clean node; a tool the node lacks has nothing to show.
keep='KUBE-(KUBELET-CANARY|IPTABLES-HINT|FIREWALL)'
for t in iptables ip6tables; do
	command -v "$t-save" >/dev/null 2>&1 || continue
	# grep -c prints 0 and exits 1 when nothing matches, and a table the
	# node cannot dump counts none: the count stands either way.
	n=$("$t-save" 2>/dev/null | grep -E 'KUBE-' | grep -cvE "$keep") || true
	if [ "$n" -gt 0 ]; then
		echo "$t $n"
	fi
done
if command -v nft >/dev/null 2>&1; then
	for f in ip ip6; do
		if nft list table "$f" kube-proxy >/dev/null 2>&1; then
			echo "nft $f"
		fi
	done
fi
if ip link show kube-ipvs0 >/dev/null 2>&1; then
	echo ipvs
fi
