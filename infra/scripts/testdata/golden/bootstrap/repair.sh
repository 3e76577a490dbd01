# homelab: bootstrap/repair
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Regenerates, over the node's etcd data, what a set-up control-plane
# node lacks: the manifests an interrupted restore set aside (.Aside) are
# put back first (they are the node's own), then kubeadm's phases write
# whatever is still missing (.Phases) from the cluster's init config.
# Nothing is deleted; a file present is never written over.
# Prints "put back NAME" or "wrote PATH" for each file it brought back.
if [ -d '/etc/kubernetes/manifests.homelab-restore' ]; then
	for f in '/etc/kubernetes/manifests.homelab-restore'/*.yaml; do
		[ -f "$f" ] || continue
		[ -e '/etc/kubernetes/manifests'/"${f##*/}" ] || { mv "$f" '/etc/kubernetes/manifests'/; echo "put back ${f##*/}"; }
	done
	rmdir '/etc/kubernetes/manifests.homelab-restore' 2>/dev/null || true
fi
[ -f '/etc/kubernetes/pki/apiserver.crt' ] || { kubeadm init phase certs apiserver --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/apiserver.crt'; }
[ -f '/etc/kubernetes/pki/apiserver-kubelet-client.crt' ] || { kubeadm init phase certs apiserver-kubelet-client --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/apiserver-kubelet-client.crt'; }
[ -f '/etc/kubernetes/pki/apiserver-etcd-client.crt' ] || { kubeadm init phase certs apiserver-etcd-client --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/apiserver-etcd-client.crt'; }
[ -f '/etc/kubernetes/pki/front-proxy-client.crt' ] || { kubeadm init phase certs front-proxy-client --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/front-proxy-client.crt'; }
[ -f '/etc/kubernetes/pki/etcd/server.crt' ] || { kubeadm init phase certs etcd-server --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/etcd/server.crt'; }
[ -f '/etc/kubernetes/pki/etcd/peer.crt' ] || { kubeadm init phase certs etcd-peer --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/etcd/peer.crt'; }
[ -f '/etc/kubernetes/pki/etcd/healthcheck-client.crt' ] || { kubeadm init phase certs etcd-healthcheck-client --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/pki/etcd/healthcheck-client.crt'; }
[ -f '/etc/kubernetes/admin.conf' ] || { kubeadm init phase kubeconfig admin --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/admin.conf'; }
[ -f '/etc/kubernetes/super-admin.conf' ] || { kubeadm init phase kubeconfig super-admin --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/super-admin.conf'; }
[ -f '/etc/kubernetes/controller-manager.conf' ] || { kubeadm init phase kubeconfig controller-manager --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/controller-manager.conf'; }
[ -f '/etc/kubernetes/scheduler.conf' ] || { kubeadm init phase kubeconfig scheduler --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/scheduler.conf'; }
[ -f '/etc/kubernetes/kubelet.conf' ] || { kubeadm init phase kubeconfig kubelet --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/kubelet.conf'; }
[ -f '/etc/kubernetes/manifests/etcd.yaml' ] || { kubeadm init phase etcd local --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/manifests/etcd.yaml'; }
[ -f '/etc/kubernetes/manifests/kube-apiserver.yaml' ] || { kubeadm init phase control-plane apiserver --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/manifests/kube-apiserver.yaml'; }
[ -f '/etc/kubernetes/manifests/kube-controller-manager.yaml' ] || { kubeadm init phase control-plane controller-manager --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/manifests/kube-controller-manager.yaml'; }
[ -f '/etc/kubernetes/manifests/kube-scheduler.yaml' ] || { kubeadm init phase control-plane scheduler --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/etc/kubernetes/manifests/kube-scheduler.yaml'; }
[ -f '/var/lib/kubelet/config.yaml' ] || { kubeadm init phase kubelet-start --config '/etc/kubernetes/kubeadm/init.yaml' >/dev/null; echo wrote '/var/lib/kubelet/config.yaml'; }
