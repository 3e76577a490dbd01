# homelab: manifest/apply
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Applies the cluster object whose manifest comes on stdin (never on a
# command line: it may hold a secret). Prints kubectl's output.
kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f -
