# Undoes an apply (netplan/apply) that was not confirmed in time: the
# files of /etc/netplan as they were before it, the ones it moved aside
# back in place, then `netplan apply`, and the unit stopped for the apply
# started again. Run by the node's own timer, so it works when the
# provisioner can no longer reach the node.
backup={{q .Backup}}
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ]; then rm -f "$f"; fi
done
while read -r f; do
	if [ -n "$f" ] && [ -f "$f{{.DisabledSuffix}}" ]; then rm -f "$f{{.DisabledSuffix}}"; fi
done < "$backup/disabled"
if [ -f "$backup/cloud-init-on" ]; then rm -f /etc/cloud/cloud.cfg.d/{{.CloudInitOff}}; fi
for f in "$backup"/etc/*.yaml; do
	if [ -f "$f" ]; then cp -p "$f" /etc/netplan/; fi
done
netplan apply
{{template "netplan/restart" .}}
echo "rolled back at $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$backup/outcome"
