# homelab: systemd/restart
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Restarts the unit .Unit (starts it when stopped), so it reads its
# configuration again.
systemctl restart 'containerd'
