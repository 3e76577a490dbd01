# homelab: packages/hold
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Holds the packages .Names at their installed versions, so an
# unattended upgrade never moves them. Prints nothing.
apt-mark hold 'kubeadm' 'kubelet' 'kubectl' >/dev/null
