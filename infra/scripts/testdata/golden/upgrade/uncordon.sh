# homelab: upgrade/uncordon
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes the Node .Node schedulable again once its kubelet runs at the
# target. Idempotent.
kubectl --kubeconfig /etc/kubernetes/admin.conf uncordon 'gpu-4'
