# homelab: upgrade/restart-kubelet
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Restarts the kubelet after its package moved, with systemd's units read
# again first: the package may have changed the unit or its drop-in.
systemctl daemon-reload
systemctl restart kubelet
