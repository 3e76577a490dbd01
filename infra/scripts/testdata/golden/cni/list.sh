# homelab: cni/list
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Lists the CNI configuration directory .Dir one entry a line, directories
# with a trailing slash, for cniconf.FromListing. A missing directory
# lists nothing: a node without a network yet is an answer, not an error.
ls -1Ap '/etc/cni/net.d' 2>/dev/null || true
