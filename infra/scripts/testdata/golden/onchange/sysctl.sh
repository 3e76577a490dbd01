# homelab: onchange/sysctl
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Loads the sysctl file .Path just written. -e: keys a kernel lacks
# (bridge ones before br_netfilter loads) must not fail the run.
sysctl -e -p '/etc/example' >/dev/null
