# homelab: doctor/snapshots
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# What homelab doctor judges a node's scheduled snapshots by, read-only:
# the timer's state ("timer=active" when it runs), the node's clock
# ("now=SECONDS"), then the snapshots as etcd/snapshots lists them.
echo "timer=$(systemctl is-active 'homelab-etcd-snapshot.timer' 2>/dev/null || true)"
echo "now=$(date +%s)"
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

