# Restarts the unit .Unit (starts it when stopped), so it reads its
# configuration again.
systemctl restart {{q .Unit}}
