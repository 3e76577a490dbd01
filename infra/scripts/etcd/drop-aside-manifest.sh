# Removes the etcd manifest etcd/aside set aside (.Path): the node's
# etcd has a new manifest, joining the restored cluster.
rm -f {{q .Path}}
