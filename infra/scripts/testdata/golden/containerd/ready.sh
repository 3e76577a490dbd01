# homelab: containerd/ready
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Waits until containerd, restarted to read a new configuration, serves
# again: its unit active and its socket .Socket there. A config containerd
# cannot load leaves the unit failed: the script then prints the unit's
# last journal lines, which name the file and the line, and fails.
sock='/run/containerd/containerd.sock'
i=0
while [ "$i" -lt 60 ]; do
	if systemctl is-active --quiet containerd && [ -S "$sock" ]; then
		exit 0
	fi
	if systemctl is-failed --quiet containerd; then
		break
	fi
	sleep 1
	i=$((i + 1))
done
echo "containerd does not serve on $sock after its restart:" >&2
journalctl -u containerd -n 20 --no-pager >&2 || systemctl status containerd --no-pager >&2 || true
exit 1
