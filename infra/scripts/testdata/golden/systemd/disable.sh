# homelab: systemd/disable
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Stops the unit .Unit and keeps it from starting with the machine.
systemctl disable --now 'containerd'
