# Stops the unit .Unit; it is not disabled, so it starts with the
# machine again.
systemctl stop {{q .Unit}}
