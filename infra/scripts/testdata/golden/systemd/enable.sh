# homelab: systemd/enable
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Enables the unit .Unit, so it starts with the machine. Prints
# systemctl's output; fails when the unit does not exist.
systemctl enable 'containerd'
