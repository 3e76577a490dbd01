# homelab: kubeadm/reset-keep-cas
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Undoes an interrupted kubeadm init or join on this node so that it can
# run again, keeping the cluster's identity: kubeadm reset deletes the
# certificates directory (.PKI), and the CAs and service-account keys in
# it (.Identity) are the cluster's, or the retry would mint a new
# cluster; they wait in .Keep and are put back. etcd's data is moved
# aside first (kubeadm reset deletes it too). kubeadm's own removal of
# the node's etcd member is skipped: the step removed it before, checked
# against quorum. Prints where etcd's data went, if anywhere.
b='/etc/kubernetes/.homelab-ca-keep'
rm -rf "$b"
mkdir -p "$b/etcd"
for f in 'ca.crt' 'ca.key' 'front-proxy-ca.crt' 'front-proxy-ca.key' 'etcd/ca.crt' 'etcd/ca.key' 'sa.key' 'sa.pub'; do
	if [ -f '/etc/kubernetes/pki'/"$f" ]; then cp -p '/etc/kubernetes/pki'/"$f" "$b/$f"; fi
done
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
rm -rf '/etc/kubernetes/manifests'/* '/etc/kubernetes'/*.conf /etc/kubernetes/.homelab-*-complete
mkdir -p '/etc/kubernetes/pki'/etcd
cp -rp "$b"/. '/etc/kubernetes/pki'/
rm -rf "$b"
