# Stops the unit .Unit and keeps it from starting with the machine.
systemctl disable --now {{q .Unit}}
