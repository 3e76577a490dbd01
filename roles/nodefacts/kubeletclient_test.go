package nodefacts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// testCA issues kubelet client certificates as the cluster's signer does.
type testCA struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(87600 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{t, c, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client issues a certificate for cn in org, valid from notBefore to
// notAfter, and returns it with its key (PEM).
func (ca *testCA) client(cn, org string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{org}},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

func TestKubeletCertProblem(t *testing.T) {
	ca, other := newTestCA(t, "kubernetes"), newTestCA(t, "another cluster")
	now := time.Now()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	for _, tc := range []struct {
		name   string
		issuer *testCA
		cn, o  string
		from   time.Time
		until  time.Time
		word   string // "" for none
	}{
		{"the node's", ca, "system:node:gpu-1", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), ""},
		{"expired", ca, "system:node:gpu-1", "system:nodes", now.Add(-2 * time.Hour), now.Add(-time.Hour), "expired"},
		{"not yet valid", ca, "system:node:gpu-1", "system:nodes", now.Add(time.Hour), now.Add(2 * time.Hour), "not valid before"},
		{"another node's", ca, "system:node:gpu-2", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), "system:node:gpu-2"},
		{"not a node", ca, "system:node:gpu-1", "system:masters", now.Add(-time.Hour), now.Add(time.Hour), "system:nodes"},
		{"another CA's", other, "system:node:gpu-1", "system:nodes", now.Add(-time.Hour), now.Add(time.Hour), "cluster CA"},
	} {
		certPEM, _ := tc.issuer.client(tc.cn, tc.o, tc.from, tc.until)
		c, err := ParseCertPEM(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		got := KubeletCertProblem(c, "gpu-1", pool, now)
		if (tc.word == "") != (got == "") || !strings.Contains(got, tc.word) {
			t.Errorf("%s: %q, want a problem naming %q", tc.name, got, tc.word)
		}
	}
}
