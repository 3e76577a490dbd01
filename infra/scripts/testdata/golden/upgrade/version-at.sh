# homelab: upgrade/version-at
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints the /version of the API server at .Server (this node's own, not
# the endpoint's), through the admin kubeconfig. Fails when it does not
# answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf --server 'https://10.0.0.111:6443' get --raw /version
