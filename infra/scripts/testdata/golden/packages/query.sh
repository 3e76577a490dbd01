# homelab: packages/query
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Reads, read-only, the packages .Names as dpkg knows them: one line
# "pkg=NAME STATUS VERSION" each (a package dpkg never saw prints
# nothing), after gpu/detect's lines when .GPU is set (toolkit packages
# are installed only where a GPU shows).
dpkg-query -W -f='pkg=${Package} ${db:Status-Abbrev} ${Version}\n' 'kubeadm' 'kubelet' 'kubectl' 2>/dev/null || true
