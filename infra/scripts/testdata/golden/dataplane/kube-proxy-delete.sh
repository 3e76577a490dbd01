# homelab: dataplane/kube-proxy-delete
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes kube-proxy's DaemonSet and ConfigMap once Cilium's replacement
# serves Services, waiting until they are gone.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system delete daemonset/kube-proxy configmap/kube-proxy --ignore-not-found --wait=true
