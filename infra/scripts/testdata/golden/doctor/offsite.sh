# homelab: doctor/offsite
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# What homelab doctor judges a node's off-site snapshots by, read-only:
# the node's clock ("now=SECONDS"), then the snapshots in its folder of
# the bucket, one "snapshot=NAME" line each, listed by the node's own
# rclone and configuration, the path its uploads take. "missing=WHAT"
# when the node lacks rclone or its configuration, "error=LINE" (rclone's
# last line) when the bucket does not answer. Short timeouts, one try:
# doctor reports, the timer retries.
echo "now=$(date +%s)"
if ! command -v rclone >/dev/null 2>&1; then
	echo "missing=rclone"
	exit 0
fi
if [ ! -r '/etc/homelab/etcd-snapshots-s3.conf' ]; then
	echo "missing="'/etc/homelab/etcd-snapshots-s3.conf'
	exit 0
fi
unset AWS_CA_BUNDLE AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
if ! out=$(rclone --config '/etc/homelab/etcd-snapshots-s3.conf' --ca-cert '/etc/homelab/etcd-snapshots-s3-ca.crt' --contimeout 10s --timeout 30s \
	--retries 1 --low-level-retries 1 --stats 0 -q lsf --files-only 'offsite:backups/lab/etcd/cp-1' 2>&1); then
	echo "error=$(printf '%s\n' "$out" | grep . | tail -n 1)"
	exit 0
fi
printf '%s\n' "$out" | grep -E '^snapshot-[0-9]{8}T[0-9]{6}Z\.db$' | sed 's/^/snapshot=/' || true
