# homelab: transport/upload-finish
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Gives the uploaded temporary file .Tmp its mode .Mode (octal) and renames
# it over .Path in one step, so a reader sees the old file or the new one,
# never a half-written one; on failure the temporary file goes.
if ! { chmod 0640 '/etc/kubernetes/.it'\''s here.conf.homelab-0a1b2c3d4e5f' && mv -f -- '/etc/kubernetes/.it'\''s here.conf.homelab-0a1b2c3d4e5f' '/etc/kubernetes/it'\''s here.conf'; }; then
	rm -f -- '/etc/kubernetes/.it'\''s here.conf.homelab-0a1b2c3d4e5f'
	exit 1
fi
