# homelab: kubectl/csr-list
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads every CertificateSigningRequest as a JSON List. Fails when the
# API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf get csr -o json
