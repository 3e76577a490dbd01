# homelab: netplan/apply
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Puts the netplan file staged at .Staged in place as .Path and applies it
# with netplan try's safety: nothing on the node changes unless netplan
# accepts the whole directory as it will be (generated under a scratch
# root); the files .Disable, which also configure the interface, are moved
# aside (renamed *.homelab-disabled: netplan reads only *.yaml); and a
# timer restores everything (.Backup/rollback.sh, uploaded beside) after
# .RollbackAfter seconds unless netplan/confirm, run over a fresh SSH
# connection, disarms it. `netplan apply` runs as a unit of its own, so
# a change that cuts this session off still finishes, or is rolled back.
# .Restart, a unit the provisioner stopped for the apply (keepalived,
# handing the VIP over), is recorded for whichever ends the apply, the
# confirmation or the rollback, to start again: the session that stopped
# it may be cut off.
staged='/var/lib/homelab/netplan/staged.yaml'
backup='/var/lib/homelab/netplan/backup'
# The files to move aside.
set -- '/etc/netplan/50-cloud-init.yaml'
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc/netplan" "$root/lib" "$root/run"
if [ -d /lib/netplan ]; then cp -a /lib/netplan "$root/lib/"; fi
if [ -d /run/netplan ]; then cp -a /run/netplan "$root/run/"; fi
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ]; then cp -p "$f" "$root/etc/netplan/"; fi
done
for f in "$@"; do rm -f "$root$f"; done
cp "$staged" "$root"'/etc/netplan/60-homelab.yaml'
if ! out=$(netplan generate --root-dir "$root" 2>&1); then
	rm -f "$staged"
	echo "netplan refuses it: $out" >&2
	exit 3
fi

# A rollback left armed by an apply that was never confirmed is stale.
systemctl stop homelab-netplan-rollback.timer homelab-netplan-apply.service 2>/dev/null || true
systemctl reset-failed homelab-netplan-rollback.service homelab-netplan-rollback.timer homelab-netplan-apply.service 2>/dev/null || true
mkdir -p "$backup/etc"
find "$backup/etc" -mindepth 1 -delete
for f in /etc/netplan/*.yaml; do
	if [ -f "$f" ]; then cp -p "$f" "$backup/etc/"; fi
done
printf '%s\n' "$@" > "$backup/disabled"
rm -f "$backup/restart"
echo 'keepalived' > "$backup/restart"
# Whether cloud-init may still render the network, for the rollback.
rm -f "$backup/cloud-init-on"
if [ -d /etc/cloud/cloud.cfg.d ] && [ ! -e /etc/cloud/cloud.cfg.d/99-homelab-network.cfg ]; then : > "$backup/cloud-init-on"; fi
systemd-run --quiet --unit=homelab-netplan-rollback --on-active=120 \
	--timer-property=AccuracySec=1s /bin/sh "$backup/rollback.sh"

for f in "$@"; do
	if [ -f "$f" ]; then mv "$f" "$f.homelab-disabled"; fi
	# cloud-init renders its file again on a new instance, or every boot
	# where so configured: told to leave the network alone, as Ubuntu's
	# own documentation says, so the file stays aside.
	if [ "$(basename "$f")" = 50-cloud-init.yaml ] && [ -d /etc/cloud/cloud.cfg.d ]; then
		echo 'network: {config: disabled}' > /etc/cloud/cloud.cfg.d/99-homelab-network.cfg
	fi
done
mv "$staged" '/etc/netplan/60-homelab.yaml'
chmod 600 '/etc/netplan/60-homelab.yaml'
systemd-run --quiet --no-block --unit=homelab-netplan-apply --service-type=oneshot netplan apply
echo armed
