# Whether kube-proxy serves Services: prints the names of its DaemonSet
# and ConfigMap that exist, nothing when both are gone. Fails when the
# API does not answer.
{{.Kubectl}} -n kube-system get daemonset/kube-proxy configmap/kube-proxy -o name --ignore-not-found
