# Seeds a blank control-plane node with the restored data (every
# control-plane disk was lost): the data in .DataDir as etcd/restore-data
# puts it, then the node marked set up (.Marker), so the up that follows
# repairs its control plane over this data instead of initialising a new
# cluster.
{{template "etcd/restore-data" .}}
mkdir -p "$(dirname {{q .Marker}})"
touch {{q .Marker}}
