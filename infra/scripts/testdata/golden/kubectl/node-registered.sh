# homelab: kubectl/node-registered
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Whether the kubelet of .Node has registered its Node: exits 0 once the
# API has it, non-zero while it has not (or the API does not answer).
# Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-1' >/dev/null
