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
pki={{q .PKIDir}}
t=$(mktemp -d /etc/kubernetes/.homelab-pki.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/etcd"
{{- range .CAs}}
cp -p $pki/{{.Name}}.crt $pki/{{.Name}}.key "$t/{{.Dir}}"
{{- end}}
sed "s#^certificatesDir: .*#certificatesDir: $t#" {{q .Config}} > "$t/config.yaml"
{{- range .Certs}}
kubeadm init phase certs {{.Phase}} --config "$t/config.yaml"
mv -f "$t/{{.Base}}.key" $pki/{{.Base}}.key
mv -f "$t/{{.Base}}.crt" $pki/{{.Base}}.crt
{{- end}}
