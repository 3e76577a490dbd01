# Stops the kubelet of a node leaving the cluster, once drained and before
# its Node is deleted: a kubelet still running could register the Node
# again. Prints systemctl's output.
systemctl stop kubelet
