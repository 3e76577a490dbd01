# homelab: upgrade/pods-left
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints namespace/name of each pod still on the Node .Node that no
# DaemonSet owns, space-separated: what a drain that timed out left.
kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A --field-selector spec.nodeName='gpu-4' -o jsonpath='{range .items[?(@.metadata.ownerReferences[0].kind!="DaemonSet")]}{.metadata.namespace}/{.metadata.name} {end}'
