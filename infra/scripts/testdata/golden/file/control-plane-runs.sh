# homelab: file/control-plane-runs
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Whether a control plane runs on this node (its apiserver's static pod
# manifest .Manifest is there): prints "running", or nothing when none
# does. Its key material must not be removed under it.
if [ -f '/etc/kubernetes/manifests/kube-apiserver.yaml' ]; then
	echo running
fi
