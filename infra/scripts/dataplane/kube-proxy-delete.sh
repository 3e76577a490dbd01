# Deletes kube-proxy's DaemonSet and ConfigMap once Cilium's replacement
# serves Services, waiting until they are gone.
{{.Kubectl}} -n kube-system delete daemonset/kube-proxy configmap/kube-proxy --ignore-not-found --wait=true
