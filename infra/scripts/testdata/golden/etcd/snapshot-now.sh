# homelab: etcd/snapshot-now
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Runs the node's scheduled snapshot now, as its timer would: the oneshot
# .Service saves the snapshot and copies it off-site; systemctl start
# waits for it and fails with it. Then prints that run's output alone
# (journald's lines of its invocation), the "copied to s3://..." line
# among them. A node whose timer files are missing is told so.
if [ ! -x '/usr/local/sbin/homelab-etcd-snapshot' ]; then
	echo "no scheduled snapshots here (/usr/local/sbin/homelab-etcd-snapshot is missing): homelab up installs them (cluster.etcd.snapshots)" >&2
	exit 3
fi
rc=0
systemctl start 'homelab-etcd-snapshot.service' || rc=$?
id=$(systemctl show -p InvocationID --value 'homelab-etcd-snapshot.service')
[ -n "$id" ] && journalctl -o cat --no-pager _SYSTEMD_INVOCATION_ID="$id"
exit $rc
