# Prints the Node .Node's kubelet version and its Ready condition's status
# ("v1.35.4 True"). Fails when the API does not answer.
{{.Kubectl}} get node {{q .Node}} -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}'
