// Package pkitest issues throwaway certificates for tests: a CA and
// leaves it signs (ECDSA P-256, PEM), with the dates, names and usages a
// test states, so expiry, a wrong issuer or a missing SAN can be staged
// in a line. The product's own certificates come from roles/pki.
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a self-signed CA, valid from a day ago for ten years.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert encoded, as a ca.crt file holds it.
	PEM []byte
}

// NewCA makes a CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM(der)}
}

// Pool holds the CA alone, to verify against.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// Leaf is what an issued certificate says.
type Leaf struct {
	CN   string
	Orgs []string
	// NotBefore zero is an hour before NotAfter or now, whichever is
	// earlier; NotAfter zero is an hour from now.
	NotBefore, NotAfter time.Time
	DNS                 []string
	IPs                 []net.IP
	// Usages nil is server and client auth, as kubeadm's etcd peer
	// certificates.
	Usages []x509.ExtKeyUsage
}

// Issue signs l and returns the certificate and its key, PEM encoded.
func (c *CA) Issue(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	der, key := c.sign(t, l)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", kder)
}

// TLS signs l for a Go server or client.
func (c *CA) TLS(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	der, key := c.sign(t, l)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (c *CA) sign(t testing.TB, l Leaf) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	now := time.Now()
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(time.Hour)
	}
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Hour)
		if l.NotAfter.Before(now) {
			l.NotBefore = l.NotAfter.Add(-time.Hour)
		}
	}
	if l.Usages == nil {
		l.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: l.CN, Organization: l.Orgs},
		NotBefore: l.NotBefore, NotAfter: l.NotAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: l.Usages,
		DNSNames: l.DNS, IPAddresses: l.IPs}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// serial is random, as kubeadm's: two certificates a test issues in the
// same nanosecond still differ.
func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func certPEM(der []byte) []byte { return pemOf("CERTIFICATE", der) }

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// Request is a certificate signing request for l's names (CN, Orgs, DNS,
// IPs; its dates and usages are the signer's business), PEM encoded, as a
// kubelet's certificate manager sends one.
func Request(t testing.TB, l Leaf) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: l.CN, Organization: l.Orgs}, DNSNames: l.DNS, IPAddresses: l.IPs}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
