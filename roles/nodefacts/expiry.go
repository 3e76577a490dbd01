package nodefacts

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"time"
)

// LeafCerts are the certificate files kubeadm issues on a control-plane
// node, each a year by default, none renewed unless something renews it.
var LeafCerts = []string{
	PKIFile("apiserver.crt"), PKIFile("apiserver-kubelet-client.crt"), PKIFile("apiserver-etcd-client.crt"),
	PKIFile("front-proxy-client.crt"), PKIFile("etcd/server.crt"), PKIFile("etcd/peer.crt"),
	PKIFile("etcd/healthcheck-client.crt"),
}

// KubeletClientCert is the kubelet's rotating client certificate; the file
// holds its key too, of which the probe prints nothing.
const KubeletClientCert = KubeletPKIDir + "/kubelet-client-current.pem"

// expiryScript prints, for ParseExpiry, "cert=PATH BASE64" for each leaf
// certificate and the kubelet's client certificate (the first CERTIFICATE
// block's DER, never a key), and "kubeconfig-cert=PATH BASE64" for each
// kubeconfig's embedded client-certificate-data (never its key). One awk
// reads them all: a shell, sed and base64 per file were most of what a
// refresh of a control-plane node cost (docs/benchmarks.md).
func expiryScript(root string) string {
	return "r=" + rootWord(root) + "\n" +
		"set --\n" +
		"for f in " + strings.Join(LeafCerts, " ") + " " + KubeletClientCert + `; do [ -f "$r$f" ] && set -- "$@" "$r$f"; done` + "\n" +
		`for p in "$r"` + KubernetesDir + `/*.conf; do [ -f "$p" ] && set -- "$@" "$p"; done` + "\n" +
		`[ $# -eq 0 ] || awk -v n=${#r} '
FNR == 1 { got = 0; inb = 0; d = "" }
got { next }
FILENAME ~ /\.conf$/ { if ($1 == "client-certificate-data:") { print "kubeconfig-cert=" substr(FILENAME, n + 1) " " $2; got = 1 } next }
/-----BEGIN CERTIFICATE-----/ { inb = 1; next }
/-----END CERTIFICATE-----/ { if (inb) { print "cert=" substr(FILENAME, n + 1) " " d; got = 1 } next }
inb { d = d $0 }
' "$@"` + "\n" +
		"true"
}

// ExpiryScript is expiryScript on the node's own tree.
var ExpiryScript = expiryScript("")

// Expiry is one certificate's end of validity, by where it is.
type Expiry struct {
	Path     string // the file; a kubeconfig's embedded certificate is the kubeconfig
	Subject  string
	NotAfter time.Time
	// Serial tells a certificate issued again from the one it replaces,
	// whatever their dates (hex).
	Serial string
}

// ParseExpiry reads ExpiryScript's output, in its order.
func ParseExpiry(out string) []Expiry {
	var list []Expiry
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || (k != "cert" && k != "kubeconfig-cert") {
			continue
		}
		p, data, _ := strings.Cut(v, " ")
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			continue
		}
		// A file's certificate comes as DER, a kubeconfig's as the PEM
		// it embeds.
		var c *x509.Certificate
		if bytes.HasPrefix(raw, []byte("-----BEGIN")) {
			c, err = ParseCertPEM(raw)
		} else {
			c, err = x509.ParseCertificate(raw)
		}
		if err != nil {
			continue
		}
		list = append(list, Expiry{Path: p, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, Serial: c.SerialNumber.Text(16)})
	}
	return list
}
