# homelab: file/remove
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Removes the file .Path a File resource wrote, and its directory when
# that is left empty (a drop-in directory only the file needed); a
# directory still holding anything stays. A file already gone is no
# failure.
p='/etc/systemd/system/keepalived.service.d/homelab.conf'
rm -f "$p"
rmdir "$(dirname "$p")" 2>/dev/null || true
