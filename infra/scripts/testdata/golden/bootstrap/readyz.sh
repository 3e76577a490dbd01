# homelab: bootstrap/readyz
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether this node's API answers /readyz: the exit status is the
# answer. Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw=/readyz >/dev/null 2>&1
