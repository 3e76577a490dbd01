# homelab: kubeadm/reset
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Resets a node that leaves the cluster (kubeadm reset): what kubeadm and
# homelab left on it goes (.Manifests, the kubeconfigs in .KubeDir, the
# completion markers .MarkerGlob, the detached runs .Runs, etcd's data
# directory .EtcdData, the kubelet's credentials .KubeletPKI) and its
# kubelet is stopped; etcd's member data is moved aside first. Past
# that, best effort: the node is out of the cluster's records already.
# Prints where etcd's data went, if anywhere.
#
# A failure moving the data aside stops the reset (set -e): kubeadm reset
# and the removal below would delete the data it failed to keep.
# Moves this node's etcd member data (.Member) to a new directory under
# .AsideDir before a kubeadm reset, which deletes etcd's data directory:
# the data is kept, never deleted. etcd is stopped first (its kubelet,
# then the process), so the copy is whole (a rename on one filesystem, a
# copy across two). Prints .AsidePrefix followed by where the data went;
# nothing when the node holds none. The reset scripts include it; its
# variable is a.
if [ -d '/var/lib/etcd/member' ]; then
	systemctl stop kubelet >/dev/null 2>&1 || true
	pkill -f '^([^ ]*/)?etcd( |$)' || true
	for _ in $(seq 30); do pgrep -f '^([^ ]*/)?etcd( |$)' >/dev/null || break; sleep 1; done
	a='/var/lib/homelab/etcd-aside'/$(date -u +%Y%m%dT%H%M%SZ)
	mkdir -p "$a"
	chmod 700 '/var/lib/homelab/etcd-aside' "$a"
	mv '/var/lib/etcd/member' "$a/"
	echo 'etcd-aside='"$a/member"
fi
kubeadm reset -f --skip-phases=remove-etcd-member >/dev/null 2>&1 || true
systemctl stop kubelet >/dev/null 2>&1 || true
rm -rf '/etc/kubernetes/manifests'/* '/etc/kubernetes'/*.conf /etc/kubernetes/.homelab-*-complete '/var/lib/homelab/runs' '/var/lib/etcd' '/var/lib/kubelet/pki' || true
