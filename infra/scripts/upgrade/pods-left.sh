# Prints namespace/name of each pod still on the Node .Node that no
# DaemonSet owns, space-separated: what a drain that timed out left.
{{.Kubectl}} get pods -A --field-selector spec.nodeName={{q .Node}} -o jsonpath='{range .items[?(@.metadata.ownerReferences[0].kind!="DaemonSet")]}{.metadata.namespace}/{.metadata.name} {end}'
