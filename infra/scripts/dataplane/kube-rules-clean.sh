# What `kube-proxy --cleanup` does, without the kube-proxy binary on the
# node: every KUBE-* chain and every rule jumping to one goes (the
# kubelet's own chains .Keep stay), then kube-proxy's nftables tables,
# then the IPVS services with their dummy interface (only when
# kube-proxy's kube-ipvs0 exists: IPVS has no owner marks). Prints what
# the tools print; fails on the first removal that fails.
keep={{q .Keep}}
for t in iptables ip6tables; do
	command -v "$t-save" >/dev/null 2>&1 || continue
	# Dumped once and filtered whole: a reader that stops at its first
	# match would fail the dump's pipe, and a table that cannot be dumped
	# has nothing to clean here.
	rules=$("$t-save" 2>/dev/null) || true
	n=$(printf '%s\n' "$rules" | grep -E 'KUBE-' | grep -cvE "$keep") || true
	if [ "$n" -gt 0 ]; then
		printf '%s\n' "$rules" | awk -v keep="$keep" '/KUBE-/ && $0 !~ keep {next} {print}' | "$t-restore"
	fi
done
if command -v nft >/dev/null 2>&1; then
	for f in ip ip6; do
		if nft list table "$f" kube-proxy >/dev/null 2>&1; then
			nft delete table "$f" kube-proxy
		fi
	done
fi
if ip link show kube-ipvs0 >/dev/null 2>&1; then
	if command -v ipvsadm >/dev/null 2>&1; then
		ipvsadm --clear
	fi
	ip link delete kube-ipvs0
fi
