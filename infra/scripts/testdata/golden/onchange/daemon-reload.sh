# homelab: onchange/daemon-reload
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes systemd read the unit file or drop-in .Path just written. systemd
# applies a drop-in's ExecStopPost= to the running unit at daemon-reload:
# no restart (keepalived's VIP does not move).
systemctl daemon-reload
