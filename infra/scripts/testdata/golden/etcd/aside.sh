# homelab: etcd/aside
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Stops the control plane for a restore: each static pod of .Pods whose
# manifest is in .ManifestDir is moved to .AsideDir (the kubelet stops
# it), to be put back by etcd/back.
for p in 'etcd' 'kube-apiserver' 'kube-controller-manager' 'kube-scheduler'; do
	if [ -f '/etc/kubernetes/manifests'/"$p".yaml ]; then
		mkdir -p '/etc/kubernetes/manifests.homelab-restore'
		mv -f '/etc/kubernetes/manifests'/"$p".yaml '/etc/kubernetes/manifests.homelab-restore'/
	fi
done
