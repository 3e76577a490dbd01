# Starts the unit .Unit when it is not running; a running one is left
# as it is.
systemctl start {{q .Unit}}
