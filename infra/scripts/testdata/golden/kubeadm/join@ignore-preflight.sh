# homelab: kubeadm/join
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Joins this node to the cluster with the join config .Config (kubeadm
# join), then deletes the config, which holds the node's token, whatever
# the join did, and marks the node set up (.Marker) when it joined: a
# later read tells a finished join from an interrupted one by it.
# Prints kubeadm's output; exits with its status, which a failed rm or
# touch after it has never changed.
rc=0
kubeadm join --config '/etc/kubernetes/kubeadm/join.yaml' --ignore-preflight-errors='NumCPU' || rc=$?
rm -f '/etc/kubernetes/kubeadm/join.yaml' || true
if [ "$rc" -eq 0 ]; then
	touch '/etc/kubernetes/.homelab-join-complete' || true
fi
exit "$rc"
