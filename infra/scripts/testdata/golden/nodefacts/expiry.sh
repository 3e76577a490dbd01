# homelab: nodefacts/expiry
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Prints, for roles/nodefacts.ParseExpiry, "cert=PATH BASE64" for each of
# .Certs on the node (its first CERTIFICATE block's DER, never a key) and
# "kubeconfig-cert=PATH BASE64" for each kubeconfig's embedded
# client-certificate-data (never its key). One awk reads them all: a
# shell, sed and base64 per file were most of a refresh's cost
# (docs/benchmarks.md). Paths are read below .Root (a test's tree).
# Read-only.
r=
set --
for f in '/etc/kubernetes/pki/apiserver.crt' '/etc/kubernetes/pki/apiserver-kubelet-client.crt' '/etc/kubernetes/pki/apiserver-etcd-client.crt' '/etc/kubernetes/pki/front-proxy-client.crt' '/etc/kubernetes/pki/etcd/server.crt' '/etc/kubernetes/pki/etcd/peer.crt' '/etc/kubernetes/pki/etcd/healthcheck-client.crt' '/var/lib/kubelet/pki/kubelet-client-current.pem'; do
	if [ -f "$r$f" ]; then set -- "$@" "$r$f"; fi
done
for p in "$r"'/etc/kubernetes'/*.conf; do
	if [ -f "$p" ]; then set -- "$@" "$p"; fi
done
# A file gone before awk reads it (a renewal) still leaves the others'.
[ $# -eq 0 ] || awk -v n=${#r} '
FNR == 1 { got = 0; inb = 0; d = "" }
got { next }
FILENAME ~ /\.conf$/ { if ($1 == "client-certificate-data:") { print "kubeconfig-cert=" substr(FILENAME, n + 1) " " $2; got = 1 } next }
/-----BEGIN CERTIFICATE-----/ { inb = 1; next }
/-----END CERTIFICATE-----/ { if (inb) { print "cert=" substr(FILENAME, n + 1) " " d; got = 1 } next }
inb { d = d $0 }
' "$@" || true
