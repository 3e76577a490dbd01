# homelab: upgrade/cluster-config
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints the ClusterConfiguration kubeadm keeps in the kubeadm-config
# ConfigMap (its kubernetesVersion is the version the cluster was last
# applied at). Fails when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'
