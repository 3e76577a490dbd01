# homelab: kubectl/csr-approve
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Approves the CertificateSigningRequest .Name, which up checked first
# (infra/servingcert). Prints nothing.
kubectl --kubeconfig /etc/kubernetes/admin.conf certificate approve 'csr-own' >/dev/null
