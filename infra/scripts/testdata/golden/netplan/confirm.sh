# homelab: netplan/confirm
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Confirms an apply (netplan/apply) over a fresh SSH connection: waits for
# `netplan apply` to finish, then checks that .Interface is configured by
# netplan's definition (systemd-networkd's network file for it) with the
# static address .Address and no DHCP lease. Confirmed, it disarms the
# rollback, starts again the unit stopped for the apply, and prints
# "confirmed"; otherwise it rolls back at once and
# prints why, on one line starting "refused:".
iface='eth0'
addr='10.0.0.11/24'
why=
result=$(
# Waits (up to a minute) for the `netplan apply` netplan/apply started to
# finish, so that what the provisioner asks next meets the new network
# configuration, not the old one; prints the apply's result.
i=0
while [ "$(systemctl show -p ActiveState --value homelab-netplan-apply.service)" = activating ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
systemctl show -p Result --value homelab-netplan-apply.service

)
if [ "$result" != success ]; then
	why="netplan apply failed: $(journalctl -u homelab-netplan-apply.service -n 3 --no-pager -o cat 2>/dev/null | tr '\n' ' ')"
fi
# networkd may take a moment to take the link over after its reload.
i=0
while [ -z "$why" ]; do
	file=$(networkctl status "$iface" --no-pager 2>/dev/null | awk -F': ' '/Network File:/ { print $2; exit }')
	case "$file" in
	/run/systemd/network/10-netplan-*) break ;;
	esac
	if [ $i -ge 10 ]; then
		why="systemd-networkd does not configure $iface from netplan (its network file: ${file:-none}); a match (nodes[].mac, nodes[].interface) that finds no NIC does this"
		break
	fi
	sleep 1
	i=$((i + 1))
done
if [ -z "$why" ]; then
	line=$(ip -o addr show dev "$iface" | grep -F " $addr " || true)
	if [ -z "$line" ]; then
		why="$iface does not hold $addr"
	elif echo "$line" | grep -qw dynamic; then
		why="$addr on $iface is a DHCP lease, not the static address"
	fi
fi
if [ -n "$why" ]; then
	# Now rather than when the timer fires; as a unit of its own, so
	# losing this session does not stop it halfway.
	systemctl stop homelab-netplan-rollback.timer 2>/dev/null || true
	systemctl reset-failed homelab-netplan-rollback-now.service 2>/dev/null || true
	systemd-run --quiet --no-block --unit=homelab-netplan-rollback-now /bin/sh '/var/lib/homelab/netplan/backup'/rollback.sh
	echo "refused: $why"
	exit 0
fi
systemctl stop homelab-netplan-rollback.timer
# Starts again the unit netplan/apply recorded as stopped for the apply
# (keepalived, which handed the VIP over), once, by whichever ends the
# apply; a unit that fails to start is in its journal, and the next up
# starts it.
if [ -f '/var/lib/homelab/netplan/backup'/restart ]; then
	systemctl start "$(cat '/var/lib/homelab/netplan/backup'/restart)" || true
	rm -f '/var/lib/homelab/netplan/backup'/restart
fi

systemctl reset-failed homelab-netplan-rollback.service homelab-netplan-rollback.timer homelab-netplan-apply.service 2>/dev/null || true
echo confirmed
