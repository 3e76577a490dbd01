# homelab: upgrade/node-ready
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints the Node .Node's kubelet version and its Ready condition's status
# ("v1.35.4 True"). Fails when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-4' -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}'
