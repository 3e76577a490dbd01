# homelab: dataplane/node-ready
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# The Ready condition of the Node .Node, as "STATUS REASON: MESSAGE"
# ("True KubeletReady: ..."): whether its runtime has a pod network yet.
# Prints nothing while the Node is not registered; fails when the API
# does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-1' --ignore-not-found -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.reason}: {.message}{end}'
