# homelab: kubectl/kubelet-config-serving
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Turns on serverTLSBootstrap in the cluster's kubelet configuration
# (kube-system/kubelet-config, which kubeadm join and kubeadm upgrade
# write to every node's kubelet), so a node joined or upgraded later keeps
# it. A server-side apply of that one key's document: the rest of the
# ConfigMap stays as kubeadm made it. Prints nothing.
cfg=$(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get configmap kubelet-config -o jsonpath='{.data.kubelet}')
if printf '%s\n' "$cfg" | grep -qx 'serverTLSBootstrap: true'; then
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%s\n' "$cfg" | sed '/^serverTLSBootstrap:/d' >"$dir/kubelet"
echo 'serverTLSBootstrap: true' >>"$dir/kubelet"
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system create configmap kubelet-config --from-file=kubelet="$dir/kubelet" --dry-run=client -o yaml |
	kubectl --kubeconfig /etc/kubernetes/admin.conf apply --server-side --force-conflicts --field-manager=homelab -f - >/dev/null
