# homelab: cluster/uid
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads the cluster's identity, its kube-system namespace's UID, through
# this node's admin kubeconfig. Prints the UID alone, no newline; exits
# non-zero when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get namespace kube-system -o jsonpath='{.metadata.uid}'
