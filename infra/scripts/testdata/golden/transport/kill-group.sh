# homelab: transport/kill-group
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Kills the process group .PID of a cancelled command (its shell is the
# group's leader), so nothing the command started outlives it. A group
# already gone is no failure.
kill -KILL -- -4242 2>/dev/null || true
