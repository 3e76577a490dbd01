# What a node's netplan holds: whether netplan is installed, the checksum
# of homelab's file .Path ("-" when absent), the systemd-networkd file
# that configures .Interface (none when none does), and every other file
# in /etc/netplan, base64 on one line each (roles/netplan.ParseRead).
if command -v netplan >/dev/null 2>&1; then echo "netplan yes"; else echo "netplan no"; fi
if [ -f {{q .Path}} ]; then
	echo "ours $(sha256sum {{q .Path}} | cut -d' ' -f1)"
else
	echo "ours -"
fi
echo "networkfile $(networkctl status {{q .Interface}} --no-pager 2>/dev/null | awk -F': ' '/Network File:/ && $2 != "n/a" { print $2; exit }')"
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ] && [ "$f" != {{q .Path}} ]; then
		echo "file $f $(base64 -w0 "$f")"
	fi
done
