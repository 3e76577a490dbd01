# homelab: leave/drain
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Drains the worker Node .Node before it leaves the cluster, evicting its
# pods within a minute. Best effort: the removal goes on whatever it
# says. Prints kubectl's output.
kubectl --kubeconfig /etc/kubernetes/admin.conf drain 'gpu-1' --ignore-daemonsets --delete-emptydir-data --force --timeout=60s
