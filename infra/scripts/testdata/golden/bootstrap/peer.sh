# homelab: bootstrap/peer
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the cluster already runs on this control-plane peer,
# before an init could start a second one. Prints "live" when its API
# answers, "data" when it holds etcd member data (.MemberDir) but its API
# does not answer, else "none".
if test -f '/etc/kubernetes/admin.conf' && kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw=/readyz >/dev/null 2>&1; then
	echo live
elif test -d '/var/lib/etcd/member'; then
	echo data
else
	echo none
fi
