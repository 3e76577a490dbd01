# Runs the node's scheduled snapshot now, as its timer would: the oneshot
# .Service saves the snapshot and copies it off-site; systemctl start
# waits for it and fails with it. Then prints that run's output alone
# (journald's lines of its invocation), the "copied to s3://..." line
# among them. A node whose timer files are missing is told so.
if [ ! -x {{q .Script}} ]; then
	echo "no scheduled snapshots here ({{.Script}} is missing): homelab up installs them (cluster.etcd.snapshots)" >&2
	exit 3
fi
rc=0
systemctl start {{q .Service}} || rc=$?
id=$(systemctl show -p InvocationID --value {{q .Service}})
[ -n "$id" ] && journalctl -o cat --no-pager _SYSTEMD_INVOCATION_ID="$id"
exit $rc
