# homelab: transport/upload-prepare
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes the directory .Dir for an upload to .Path, and refuses when .Path
# is a directory: the upload's final rename would otherwise move the file
# into it.
mkdir -p -- '/etc/kubernetes'
if [ -d '/etc/kubernetes/it'\''s here.conf' ]; then
	echo '/etc/kubernetes/it'\''s here.conf'' is a directory' >&2
	exit 1
fi
