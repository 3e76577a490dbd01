# homelab: netplan/read
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# What a node's netplan holds: whether netplan is installed, the checksum
# of homelab's file .Path ("-" when absent), the systemd-networkd file
# that configures .Interface (none when none does), and every other file
# in /etc/netplan, base64 on one line each (roles/netplan.ParseRead).
if command -v netplan >/dev/null 2>&1; then echo "netplan yes"; else echo "netplan no"; fi
if [ -f '/etc/netplan/60-homelab.yaml' ]; then
	echo "ours $(sha256sum '/etc/netplan/60-homelab.yaml' | cut -d' ' -f1)"
else
	echo "ours -"
fi
echo "networkfile $(networkctl status 'eth0' --no-pager 2>/dev/null | awk -F': ' '/Network File:/ && $2 != "n/a" { print $2; exit }')"
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ] && [ "$f" != '/etc/netplan/60-homelab.yaml' ]; then
		echo "file $f $(base64 -w0 "$f")"
	fi
done
