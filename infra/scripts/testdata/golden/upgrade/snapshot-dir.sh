# homelab: upgrade/snapshot-dir
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes the directory .Dir the etcd snapshot taken before an upgrade is
# uploaded to, readable by root alone (whoever made it before): a
# snapshot holds every Secret.
mkdir -p '/var/lib/homelab/etcd-snapshots'
chmod 0700 '/var/lib/homelab/etcd-snapshots'
