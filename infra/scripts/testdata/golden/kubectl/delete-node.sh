# homelab: kubectl/delete-node
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes the Node .Node: of a node leaving the cluster, or the one a
# replaced machine left under the name the new one joins with (gone
# already is fine). Returns once the API accepted the deletion.
kubectl --kubeconfig /etc/kubernetes/admin.conf delete node 'gpu-1' --ignore-not-found --wait=false
