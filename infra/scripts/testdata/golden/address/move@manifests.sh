# homelab: address/move
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Moves this control-plane node's etcd and apiserver to its address .New:
# their manifests come again from the kubeadm config .Config. With .Old,
# the address kubeadm baked in before, the kubeconfigs of the node's own
# components and the kubelet's node IP are rewritten in place too,
# keeping their credentials. The kubelet rereads its flags and kubeconfig
# only when restarted; the controller-manager and scheduler (processes
# matching .Restart) theirs likewise, and their manifests did not change,
# so they are ended and the kubelet starts them again. Prints what kubeadm
# prints.
config='/etc/kubernetes/kubeadm/init.yaml'
kubeadm init phase etcd local --config "$config"
kubeadm init phase control-plane apiserver --config "$config"
systemctl restart kubelet
for p in '^([^ ]*/)?kube-controller-manager( |$)' '^([^ ]*/)?kube-scheduler( |$)'; do
	pkill -f "$p" || true
done
