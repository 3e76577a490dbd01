# homelab: adopt/mark
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Writes the completion marker .Marker on a node whose kubeadm run adopt
# verified complete. Its directory must be there already: kubeadm made it,
# and a node without it is not the one that was verified.
test -d '/etc/kubernetes'
touch '/etc/kubernetes/.homelab-init-complete'
