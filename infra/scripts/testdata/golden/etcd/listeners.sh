# homelab: etcd/listeners
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Lists what still listens on etcd's ports and on the apiserver's
# (.APIPort, the inventory's cluster.endpoint.port, which kubeadm makes
# its bind port): the control plane has stopped when it prints nothing.
ss -Hltn '( sport = :2379 or sport = :2380 or sport = :6443 )'
