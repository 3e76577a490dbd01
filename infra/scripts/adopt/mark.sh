# Writes the completion marker .Marker on a node whose kubeadm run adopt
# verified complete. Its directory must be there already: kubeadm made it,
# and a node without it is not the one that was verified.
test -d {{q .Dir}}
touch {{q .Marker}}
