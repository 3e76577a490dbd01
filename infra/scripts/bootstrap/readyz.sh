# Tells whether this node's API answers /readyz: the exit status is the
# answer. Prints nothing.
{{.Kubectl}} get --raw=/readyz >/dev/null 2>&1
