# homelab: kubelet/client-link
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Makes the kubelet's current client certificate .Current the pair .Pair
# stored beside it: a link made under the temporary name .Link, then
# renamed over .Current, as the kubelet's own certificate store does, so
# the kubelet never finds the name missing. Prints nothing.
link='/var/lib/kubelet/pki/.kubelet-client-current.homelab'
ln -sfn '/var/lib/kubelet/pki/kubelet-client-2026-12-04-23-55-00.pem' "$link"
mv -Tf "$link" '/var/lib/kubelet/pki/kubelet-client-current.pem'
