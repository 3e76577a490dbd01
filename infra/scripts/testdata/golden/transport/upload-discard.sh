# homelab: transport/upload-discard
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Removes an upload's temporary file .Tmp left by an interrupted upload.
rm -f -- '/etc/kubernetes/.it'\''s here.conf.homelab-0a1b2c3d4e5f'
