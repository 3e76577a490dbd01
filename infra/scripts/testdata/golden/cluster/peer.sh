# homelab: cluster/peer
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the cluster runs on this control-plane peer, while the
# bootstrap looks for it on every node. Prints .Live when its API answers,
# .Data when it holds etcd member data (.MemberDir) but its API does not
# answer (whether the cluster exists is then unknown), else .None.
if test -f '/etc/kubernetes/admin.conf' && kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw=/readyz >/dev/null 2>&1; then
	echo 'yes'
elif test -d '/var/lib/etcd/member'; then
	echo 'data'
else
	echo 'no'
fi
