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
sed "s#^certificatesDir: .*#certificatesDir: $t#" '/etc/kubernetes/kubeadm/init.yaml' > "$t/config.yaml"
kubeadm init phase certs apiserver --config "$t/config.yaml"
mv -f "$t/apiserver.key" $pki/apiserver.key
mv -f "$t/apiserver.crt" $pki/apiserver.crt
