# homelab: etcd/readyz
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the API answers /readyz through admin.conf (.AdminConf),
# at .Server when set (one node's own apiserver), else at the server the
# kubeconfig names (the cluster's endpoint).
kubectl --kubeconfig '/etc/kubernetes/admin.conf' --server 'https://10.0.0.11:6443' get --raw=/readyz
