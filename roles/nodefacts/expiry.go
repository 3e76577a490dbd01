package nodefacts

import (
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
// certificate and the kubelet's client certificate (the CERTIFICATE block
// only), and "kubeconfig-cert=PATH BASE64" for each kubeconfig's embedded
// client-certificate-data (never its key).
func expiryScript(root string) string {
	return "r=" + shellQuote(root) + "\n" +
		"for f in " + strings.Join(LeafCerts, " ") + " " + KubeletClientCert + `; do [ -f "$r$f" ] && echo "cert=$f $(sed -n '/-BEGIN CERTIFICATE-/,/-END CERTIFICATE-/p' "$r$f" | base64 -w0)"; done` + "\n" +
		`for p in "$r"` + KubernetesDir + `/*.conf; do [ -f "$p" ] && d=$(awk '$1=="client-certificate-data:"{print $2; exit}' "$p") && [ -n "$d" ] && echo "kubeconfig-cert=${p#"$r"} $d"; done` + "\n" +
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
		c, err := ParseCertPEM(raw)
		if err != nil {
			continue
		}
		list = append(list, Expiry{Path: p, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, Serial: c.SerialNumber.Text(16)})
	}
	return list
}
