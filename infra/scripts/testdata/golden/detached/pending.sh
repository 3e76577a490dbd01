# homelab: detached/pending
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Tells whether the detached run directory .Dir is there: a run an earlier
# up started and no up collected yet. Prints "pending" when it is; exits
# 1 when not.
test -d '/var/lib/homelab/runs/kubeadm-join' && echo pending
