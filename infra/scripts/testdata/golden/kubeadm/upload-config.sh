# homelab: kubeadm/upload-config
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Uploads the cluster configuration in .Config to the cluster's
# kubeadm-config ConfigMap, which later joins and kubeadm upgrades read.
# Prints kubeadm's output.
kubeadm init phase upload-config kubeadm --config '/etc/kubernetes/kubeadm/init.yaml'
