# homelab: certs/renew-kubeconfigs
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Renews the client certificate embedded in each kubeconfig of .Names in
# place, with the lifetime the kubeadm config .Config declares.
kubeadm certs renew 'admin.conf' --config '/etc/kubernetes/kubeadm/init.yaml'
kubeadm certs renew 'super-admin.conf' --config '/etc/kubernetes/kubeadm/init.yaml'
