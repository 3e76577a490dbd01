# homelab: kubectl/nodes-get
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads the Node objects .Names as JSON: one object alone, several as a
# List, a Node that does not exist left out (nothing at all when none
# does). Fails when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-1' 'gpu-2' -o json --ignore-not-found
