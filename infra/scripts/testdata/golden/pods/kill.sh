# homelab: pods/kill
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Ends the static pod's process matching .Pattern, if it runs: the kubelet
# starts it again.
pkill -f '^([^ ]*/)?etcd( |$)' || true
