# Deletes the Node .Node of a node leaving the cluster (gone already is
# fine). Returns once the API accepted the deletion.
{{.Kubectl}} delete node {{q .Node}} --ignore-not-found --wait=false
