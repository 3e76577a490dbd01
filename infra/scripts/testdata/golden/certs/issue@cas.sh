# homelab: certs/issue
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Issues the node's certificates .Certs again from its kubeadm config
# .Config: the SANs and validity the config declares now, where `kubeadm
# certs renew` would keep the old ones. kubeadm keeps an existing
# certificate whatever its SANs and dates, so it issues them in a staging
# directory holding only the CAs they need; each pair is then renamed into
# place, and the running etcd and apiserver, which reload theirs from the
# files, never find one missing. Prints kubeadm's output.
#
# $pki, the CA and certificate names are the product's own constant paths
# (no space, no glob character), so their words need no quotes.
pki='/etc/kubernetes/pki'
t=$(mktemp -d /etc/kubernetes/.homelab-pki.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/etcd"
cp -p $pki/ca.crt $pki/ca.key "$t/"
cp -p $pki/etcd/ca.crt $pki/etcd/ca.key "$t/etcd"
cp -p $pki/front-proxy-ca.crt $pki/front-proxy-ca.key "$t/"
sed "s#^certificatesDir: .*#certificatesDir: $t#" '/etc/kubernetes/kubeadm/init.yaml' > "$t/config.yaml"
kubeadm init phase certs apiserver --config "$t/config.yaml"
mv -f "$t/apiserver.key" $pki/apiserver.key
mv -f "$t/apiserver.crt" $pki/apiserver.crt
kubeadm init phase certs etcd-server --config "$t/config.yaml"
mv -f "$t/etcd/server.key" $pki/etcd/server.key
mv -f "$t/etcd/server.crt" $pki/etcd/server.crt
kubeadm init phase certs etcd-peer --config "$t/config.yaml"
mv -f "$t/etcd/peer.key" $pki/etcd/peer.key
mv -f "$t/etcd/peer.crt" $pki/etcd/peer.crt
kubeadm init phase certs front-proxy-client --config "$t/config.yaml"
mv -f "$t/front-proxy-client.key" $pki/front-proxy-client.key
mv -f "$t/front-proxy-client.crt" $pki/front-proxy-client.crt
