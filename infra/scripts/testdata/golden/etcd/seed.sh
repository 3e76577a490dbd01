# homelab: etcd/seed
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Seeds a blank control-plane node with the restored data (every
# control-plane disk was lost): the data in .DataDir as etcd/restore-data
# puts it, then the node marked set up (.Marker), so the up that follows
# repairs its control plane over this data instead of initialising a new
# cluster.
# Puts the restored data (the tarball uploaded to .Upload) in .DataDir,
# the data there before moved aside first (etcd/move-aside).
# Moves the etcd member directory under .DataDir, if any, to a new
# directory of its own under .BeforeDir, and prints .KeptPrefix followed
# by where it went: every restore keeps the data it replaced, even two in
# the same second.
if [ -d '/var/lib/etcd'/member ]; then
	mkdir -p '/var/lib/homelab/etcd-before-restore'
	chmod 700 '/var/lib/homelab/etcd-before-restore'
	b=$(mktemp -d '/var/lib/homelab/etcd-before-restore'/"$(date -u +%Y%m%dT%H%M%SZ)"-XXXX)
	mv '/var/lib/etcd'/member "$b/"
	echo 'kept-at='"$b/member"
fi

d='/var/lib/etcd'
mkdir -p "$d"
chmod 700 "$d"
tar xzf '/var/lib/homelab/etcd-restore.tgz' -C "$d"
rm -f '/var/lib/homelab/etcd-restore.tgz'

mkdir -p "$(dirname '/etc/kubernetes/.homelab-init-complete')"
touch '/etc/kubernetes/.homelab-init-complete'
