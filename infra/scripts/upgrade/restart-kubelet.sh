# Restarts the kubelet after its package moved, with systemd's units read
# again first: the package may have changed the unit or its drop-in.
systemctl daemon-reload
systemctl restart kubelet
