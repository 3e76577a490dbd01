# homelab: etcd/back
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Puts the manifests of .Pods that etcd/aside moved to .AsideDir back in
# .ManifestDir (the kubelet starts them), and removes .AsideDir once it
# is empty.
for p in 'etcd' 'kube-apiserver' 'kube-controller-manager' 'kube-scheduler'; do
	if [ -f '/etc/kubernetes/manifests.homelab-restore'/"$p".yaml ]; then
		mv -f '/etc/kubernetes/manifests.homelab-restore'/"$p".yaml '/etc/kubernetes/manifests'/
	fi
done
rmdir '/etc/kubernetes/manifests.homelab-restore' 2>/dev/null || true
