# homelab: rejoin/node
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the Node .Node exists and is Ready, before a new machine
# joins under its name. Prints its name and Ready status ("gpu-1 True"),
# nothing when there is no such Node; exits non-zero when the API does
# not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get node 'gpu-1' --ignore-not-found -o jsonpath='{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}'
