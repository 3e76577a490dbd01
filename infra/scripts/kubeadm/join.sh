# Joins this node to the cluster with the join config .Config (kubeadm
# join), then deletes the config, which holds the node's token, whatever
# the join did, and marks the node set up (.Marker) when it joined: a
# later read tells a finished join from an interrupted one by it.
# Prints kubeadm's output; exits with its status, which a failed rm or
# touch after it has never changed.
rc=0
kubeadm join --config {{q .Config}}{{with .IgnorePreflight}} --ignore-preflight-errors={{q .}}{{end}} || rc=$?
rm -f {{q .Config}} || true
if [ "$rc" -eq 0 ]; then
	touch {{q .Marker}} || true
fi
exit "$rc"
