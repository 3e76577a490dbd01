# homelab: upgrade/apply
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Upgrades the cluster's control plane to .Target on the first
# control-plane node: kubeadm upgrade apply. Certificates are not renewed
# here: up renews them (cluster.certificates), when it decides to.
kubeadm upgrade apply 'v1.35.4' --yes --certificate-renewal=false --ignore-preflight-errors='SystemVerification'
