# How far kube-proxy's DaemonSet has rolled out: prints its generation,
# observed generation and desired, current, updated and available pod
# counts on one line, space-separated (a count the API leaves out is
# missing). Fails while the DaemonSet is absent or the API does not answer.
{{.Kubectl}} -n kube-system get daemonset/kube-proxy -o jsonpath='{.metadata.generation} {.status.observedGeneration} {.status.desiredNumberScheduled} {.status.currentNumberScheduled} {.status.updatedNumberScheduled} {.status.numberAvailable}'
