# homelab: systemd/state
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# The unit .Unit's state: prints whether it is enabled (is-enabled's
# word: enabled, disabled, ...), then whether it runs (is-active's:
# active, inactive, failed, ...), one a line. The exit code is
# is-active's.
unit='containerd'
systemctl is-enabled "$unit" || true
systemctl is-active "$unit"
