# homelab: dataplane/kube-proxy-objects
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Whether kube-proxy serves Services: prints the names of its DaemonSet
# and ConfigMap that exist, nothing when both are gone. Fails when the
# API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get daemonset/kube-proxy configmap/kube-proxy -o name --ignore-not-found
