# homelab: token/delete
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes the join token .ID's Secret once its join is over (gone already
# is fine). Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system delete secret bootstrap-token-'abcdef' --ignore-not-found >/dev/null
