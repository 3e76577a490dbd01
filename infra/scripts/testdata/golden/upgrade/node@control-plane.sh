# homelab: upgrade/node
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Upgrades this node's kubeadm-managed parts to the version the cluster
# was applied at: kubeadm upgrade node. On a control-plane node
# (.ControlPlane) its static pods, with certificates left to up (as
# upgrade/apply); on a worker its kubelet configuration.
kubeadm upgrade node --certificate-renewal=false --ignore-preflight-errors='SystemVerification'
