# homelab: dataplane/kube-proxy-restore
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Gives the cluster kube-proxy back (its DaemonSet and ConfigMap) from the
# kubeadm init config .Config, before Cilium's replacement is turned off.
kubeadm init phase addon kube-proxy --config '/etc/kubernetes/kubeadm/init.yaml'
