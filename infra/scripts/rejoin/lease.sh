# Reads the Lease of the node .Node, which its kubelet renews while it
# runs. Prints its renew time and duration in seconds
# ("2026-01-01T00:00:00.000000Z 40"), nothing when there is none; exits
# non-zero when the API does not answer.
{{.Kubectl}} -n kube-node-lease get lease {{q .Node}} --ignore-not-found -o jsonpath='{.spec.renewTime} {.spec.leaseDurationSeconds}'
