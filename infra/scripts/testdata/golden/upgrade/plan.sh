# homelab: upgrade/plan
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# kubeadm's own read-only check of the upgrade to .Target: it refuses a
# skipped minor, an unhealthy control plane or a version it cannot reach.
# .IgnorePreflight (comma-separated) are checks the user chose to skip.
kubeadm upgrade plan 'v1.35.4' --ignore-preflight-errors='SystemVerification'
