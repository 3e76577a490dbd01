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

// Expiry is one certificate's end of validity, by where it is.
type Expiry struct {
	Path     string // the file; a kubeconfig's embedded certificate is the kubeconfig
	Subject  string
	NotAfter time.Time
	// Serial tells a certificate issued again from the one it replaces,
	// whatever their dates (hex).
	Serial string
}

// ParseExpiry reads what infra/scripts/nodefacts/expiry.sh prints, in
// its order.
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
