# homelab: token/delete-init
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes every bootstrap token: run right after a new cluster's init, it
# removes the one kubeadm init mints for itself, which nothing here uses
# (every join brings its own). Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system delete secrets --field-selector type='bootstrap.kubernetes.io/token' >/dev/null
