# homelab: netplan/restart
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Starts again the unit netplan/apply recorded as stopped for the apply
# (keepalived, which handed the VIP over), once, by whichever ends the
# apply; a unit that fails to start is in its journal, and the next up
# starts it.
if [ -f '/var/lib/homelab/netplan/backup'/restart ]; then
	systemctl start "$(cat '/var/lib/homelab/netplan/backup'/restart)" || true
	rm -f '/var/lib/homelab/netplan/backup'/restart
fi
