# homelab: etcd/drop-aside-manifest
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Removes the etcd manifest etcd/aside set aside (.Path): the node's
# etcd has a new manifest, joining the restored cluster.
rm -f '/etc/kubernetes/manifests.homelab-restore/etcd.yaml'
