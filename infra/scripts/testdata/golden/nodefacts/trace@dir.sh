# homelab: nodefacts/trace
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
test -d '/var/lib/etcd/member'