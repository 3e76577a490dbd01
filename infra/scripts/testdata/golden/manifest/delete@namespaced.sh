# homelab: manifest/delete
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Deletes the object .Kind .Name (in .Namespace, when namespaced); one
# already gone is no failure. Prints kubectl's output.
kubectl --kubeconfig /etc/kubernetes/admin.conf delete 'ConfigMap' 'homelab-info' -n 'kube-public' --ignore-not-found
