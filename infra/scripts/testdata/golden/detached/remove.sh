# homelab: detached/remove
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Removes the detached run in .Dir (detached/start) once its result is
# collected, or once it is lost: the next start of its step starts anew.
rm -rf '/var/lib/homelab/runs/kubeadm-join'
