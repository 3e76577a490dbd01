# homelab: rejoin/delete-node
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes the Node .Node its previous machine left, so that the new one
# can join under its name (gone already is fine). Returns once the API
# accepted the deletion.
kubectl --kubeconfig /etc/kubernetes/admin.conf delete node 'gpu-1' --ignore-not-found --wait=false
