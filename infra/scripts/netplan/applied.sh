# Waits (up to a minute) for the `netplan apply` netplan/apply started to
# finish, so that what the provisioner asks next meets the new network
# configuration, not the old one; prints the apply's result.
i=0
while [ "$(systemctl show -p ActiveState --value homelab-netplan-apply.service)" = activating ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
systemctl show -p Result --value homelab-netplan-apply.service
