# homelab: systemd/start
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Starts the unit .Unit when it is not running; a running one is left
# as it is.
systemctl start 'containerd'
