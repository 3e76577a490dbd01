# homelab: upgrade/drain
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Drains the Node .Node before its kubelet is upgraded: its pods evicted,
# PodDisruptionBudgets honoured, within .Timeout. Prints kubectl's
# output; fails when the drain does not finish in time.
kubectl --kubeconfig /etc/kubernetes/admin.conf drain 'gpu-4' --ignore-daemonsets --delete-emptydir-data --timeout='5m'
