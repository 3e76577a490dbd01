# homelab: manifest/get
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Whether the object .Kind .Name (in .Namespace, when namespaced) exists:
# prints its kind/name, or nothing when it does not. Fails when the API
# does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get 'RuntimeClass' 'nvidia' -o name --ignore-not-found
