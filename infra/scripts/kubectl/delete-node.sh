# Deletes the Node .Node: of a node leaving the cluster, or the one a
# replaced machine left under the name the new one joins with (gone
# already is fine). Returns once the API accepted the deletion.
{{.Kubectl}} delete node {{q .Node}} --ignore-not-found --wait=false
