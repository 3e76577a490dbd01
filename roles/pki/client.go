package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// ClientCert mints a short-lived client certificate signed by one of the
// bundle's CAs (PEM in, PEM out): whoever holds the bundle can check the
// cluster from outside without borrowing a key from any node, which may be
// the one that is down.
func ClientCert(caPEM, caKeyPEM []byte, cn, org string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return nil, nil, errors.New("CA certificate is not PEM")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	caKey, err := keyutil.ParsePrivateKeyPEM(caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := caKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("CA key cannot sign")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	subject := pkix.Name{CommonName: cn}
	if org != "" {
		subject.Organization = []string{org}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(ttl),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// EtcdClient is a client certificate for etcd, signed by the bundle's etcd
// CA, valid for ttl.
func (b *Bundle) EtcdClient(cn string, ttl time.Duration) (tls.Certificate, error) {
	crt, key, err := ClientCert(b.Talos.Certs.Etcd.Crt, b.Talos.Certs.Etcd.Key, cn, "", ttl)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(crt, key)
}
