# Enables the unit .Unit, so it starts with the machine. Prints
# systemctl's output; fails when the unit does not exist.
systemctl enable {{q .Unit}}
