# homelab: nodefacts/state
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints yes when one of .Markers (alternatives: the node that ran init is
# as much a member as one that joined) and every one of .Files are on the
# node, partial when kubeadm left something behind (.Leftovers: an
# interrupted run), no otherwise. Read-only.
if {
	test -f '/etc/kubernetes/.homelab-join-complete' ||
	test -f '/etc/kubernetes/.homelab-init-complete'
} &&
	test -f '/etc/kubernetes/kubelet.conf' &&
	test -f '/etc/kubernetes/manifests/kube-apiserver.yaml' &&
	test -f '/etc/kubernetes/manifests/etcd.yaml'
then
	echo yes
elif
	ls /etc/kubernetes/manifests/*.yaml >/dev/null 2>&1 ||
	test -f '/etc/kubernetes/kubelet.conf' ||
	test -f '/etc/kubernetes/admin.conf' ||
	test -d '/var/lib/etcd/member'
then
	echo partial
else
	echo no
fi
