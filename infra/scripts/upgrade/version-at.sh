# Prints the /version of the API server at .Server (this node's own, not
# the endpoint's), through the admin kubeconfig. Fails when it does not
# answer.
{{.Kubectl}} --server {{q .Server}} get --raw /version
