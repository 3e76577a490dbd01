# homelab: kubelet/serving-read
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# What a node's kubelet serves with: whether its configuration .Config
# asks for a serving certificate from the cluster CA (serverTLSBootstrap),
# then the certificate of its store's current pair .Current (the
# certificate only: the file also holds the private key, which never
# leaves the node), then the cluster CA .CA. Sections start with a line
# "== NAME"; a missing file leaves its section empty.
echo "== serverTLSBootstrap"
if [ -r '/var/lib/kubelet/config.yaml' ]; then
	sed -n 's/^serverTLSBootstrap:[[:space:]]*//p' '/var/lib/kubelet/config.yaml'
fi
echo "== certificate"
if [ -r '/var/lib/kubelet/pki/kubelet-server-current.pem' ]; then
	sed -n '/^-----BEGIN CERTIFICATE-----$/,/^-----END CERTIFICATE-----$/p' '/var/lib/kubelet/pki/kubelet-server-current.pem'
fi
echo "== ca"
if [ -r '/etc/kubernetes/pki/ca.crt' ]; then
	cat '/etc/kubernetes/pki/ca.crt'
fi
