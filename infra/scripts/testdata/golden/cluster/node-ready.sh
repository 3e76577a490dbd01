# homelab: cluster/node-ready
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads the Ready condition of the Node .Node. Prints its status
# ("True", "False", "Unknown"), nothing when there is no such Node; exits
# non-zero when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-1' --ignore-not-found -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
