# What a node's kubelet serves with: whether its configuration .Config
# asks for a serving certificate from the cluster CA (serverTLSBootstrap),
# then the certificate of its store's current pair .Current (the
# certificate only: the file also holds the private key, which never
# leaves the node), then the cluster CA .CA. Sections start with a line
# "== NAME"; a missing file leaves its section empty.
echo "== serverTLSBootstrap"
if [ -r {{q .Config}} ]; then
	sed -n 's/^serverTLSBootstrap:[[:space:]]*//p' {{q .Config}}
fi
echo "== certificate"
if [ -r {{q .Current}} ]; then
	sed -n '/^-----BEGIN CERTIFICATE-----$/,/^-----END CERTIFICATE-----$/p' {{q .Current}}
fi
echo "== ca"
if [ -r {{q .CA}} ]; then
	cat {{q .CA}}
fi
