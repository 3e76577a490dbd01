# Starts again the unit netplan/apply recorded as stopped for the apply
# (keepalived, which handed the VIP over), once, by whichever ends the
# apply; a unit that fails to start is in its journal, and the next up
# starts it.
if [ -f {{q .Backup}}/restart ]; then
	systemctl start "$(cat {{q .Backup}}/restart)" || true
	rm -f {{q .Backup}}/restart
fi
