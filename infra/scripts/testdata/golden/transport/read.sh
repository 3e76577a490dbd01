# homelab: transport/read
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints the file .Path whole, as the SSH transport's Read returns it;
# exits .Missing when there is no such file (cat itself only ever exits 0
# or 1), so an absent file is told from one that cannot be read.
p='/etc/kubernetes/it'\''s here.conf'
if [ ! -e "$p" ]; then exit 44; fi
exec cat -- "$p"
