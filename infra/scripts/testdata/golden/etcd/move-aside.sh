# homelab: etcd/move-aside
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
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
