# homelab: nodefacts/trace
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
ls /etc/kubernetes/manifests/*.yaml >/dev/null 2>&1