# homelab: netplan/rollback
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Undoes an apply (netplan/apply) that was not confirmed in time: the
# files of /etc/netplan as they were before it, the ones it moved aside
# back in place, then `netplan apply`, and the unit stopped for the apply
# started again. Run by the node's own timer, so it works when the
# provisioner can no longer reach the node.
backup='/var/lib/homelab/netplan/backup'
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ]; then rm -f "$f"; fi
done
while read -r f; do
	if [ -n "$f" ] && [ -f "$f.homelab-disabled" ]; then rm -f "$f.homelab-disabled"; fi
done < "$backup/disabled"
if [ -f "$backup/cloud-init-on" ]; then rm -f /etc/cloud/cloud.cfg.d/99-homelab-network.cfg; fi
for f in "$backup"/etc/*.yaml; do
	if [ -f "$f" ]; then cp -p "$f" /etc/netplan/; fi
done
netplan apply
# Starts again the unit netplan/apply recorded as stopped for the apply
# (keepalived, which handed the VIP over), once, by whichever ends the
# apply; a unit that fails to start is in its journal, and the next up
# starts it.
if [ -f '/var/lib/homelab/netplan/backup'/restart ]; then
	systemctl start "$(cat '/var/lib/homelab/netplan/backup'/restart)" || true
	rm -f '/var/lib/homelab/netplan/backup'/restart
fi

echo "rolled back at $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$backup/outcome"
