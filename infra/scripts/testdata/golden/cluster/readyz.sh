# homelab: cluster/readyz
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the API answers /readyz through this node's admin
# kubeconfig: the exit status is the answer. Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw=/readyz >/dev/null
