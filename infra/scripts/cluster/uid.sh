# Reads the cluster's identity, its kube-system namespace's UID, through
# this node's admin kubeconfig. Prints the UID alone, no newline; exits
# non-zero when the API does not answer.
{{.Kubectl}} get namespace kube-system -o jsonpath='{.metadata.uid}'
