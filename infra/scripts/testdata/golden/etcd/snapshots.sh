# homelab: etcd/snapshots
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Lists the scheduled etcd snapshots in .Dir, one "MTIME NAME" line each
# (MTIME in seconds since the epoch by the node's clock), only names that
# match .Pattern: what etcdsnapshot.ParseListing reads. A node without
# the directory lists nothing.
if [ -d '/var/lib/homelab/etcd-snapshots' ]; then
	for f in '/var/lib/homelab/etcd-snapshots'/*; do
		name=${f##*/}
		if printf '%s\n' "$name" | grep -Eq '^snapshot-[0-9]{8}T[0-9]{6}Z\.db$'; then
			echo "$(stat -c %Y "$f") $name"
		fi
	done
fi
