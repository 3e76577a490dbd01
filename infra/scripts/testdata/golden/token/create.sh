# homelab: token/create
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes the join token .ID's Secret, its manifest on stdin, exist afresh:
# deleted when there, then created, so that the same again after an API
# blip does no harm. The token travels on stdin, never on a command line
# (ps on the node would show it), and `kubectl create` keeps no
# last-applied copy of it. Prints nothing; kubectl's errors go to stderr.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system delete secret bootstrap-token-'abcdef' --ignore-not-found >/dev/null
kubectl --kubeconfig /etc/kubernetes/admin.conf create -f - >/dev/null
