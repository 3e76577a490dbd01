# Tells whether the API answers /readyz through this node's admin
# kubeconfig: the exit status is the answer. Prints nothing.
{{.Kubectl}} get --raw=/readyz >/dev/null
