# Reads the Ready condition of the Node .Node. Prints its status
# ("True", "False", "Unknown"), nothing when there is no such Node; exits
# non-zero when the API does not answer.
{{.Kubectl}} get node {{q .Node}} --ignore-not-found -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
