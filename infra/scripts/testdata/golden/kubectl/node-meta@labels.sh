# homelab: kubectl/node-meta
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Gives the Node .Node its declared labels and taints: .Labels are
# kubectl label's arguments (key=value to set, key- to remove one the
# declaration dropped), .DropTaints the taints it dropped (key:effect-;
# one already gone is no failure), .Taints those to set. Prints kubectl's
# output; fails on the first label or taint that cannot be set.
kubectl --kubeconfig /etc/kubernetes/admin.conf label node 'gpu-1' --overwrite 'nvidia.com/gpu.present=true'
