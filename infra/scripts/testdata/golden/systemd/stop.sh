# homelab: systemd/stop
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Stops the unit .Unit; it is not disabled, so it starts with the
# machine again.
systemctl stop 'keepalived'
