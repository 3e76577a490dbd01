# The Ready condition of the Node .Node, as "STATUS REASON: MESSAGE"
# ("True KubeletReady: ..."): whether its runtime has a pod network yet.
# Prints nothing while the Node is not registered; fails when the API
# does not answer.
{{.Kubectl}} get node {{q .Node}} --ignore-not-found -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.reason}: {.message}{end}'
