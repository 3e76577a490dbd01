package drill

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/util/keyutil"

	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/roles/pki"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// nsDial dials from a lab namespace: a consumer is probed from where it
// runs, so loopback means that node's loopback and a cut-off node sees
// only itself.
func nsDial(ns string) dialFunc { return netns.DialerFor("/run/netns/" + ns) }

// prober holds the trust material: the cluster CA for apiservers, a client
// certificate minted from the etcd CA for etcd's /health (etcd demands
// client certificates).
type prober struct {
	apiCA   *x509.CertPool
	etcdCA  *x509.CertPool
	etcdKey tls.Certificate
}

func newProber(b *pki.Bundle) (*prober, error) {
	p := &prober{apiCA: x509.NewCertPool(), etcdCA: x509.NewCertPool()}
	p.apiCA.AppendCertsFromPEM(b.Talos.Certs.K8s.Crt)
	p.etcdCA.AppendCertsFromPEM(b.Talos.Certs.Etcd.Crt)
	var err error
	p.etcdKey, err = etcdClientCert(b)
	return p, err
}

// readyz asks addr's apiserver /readyz with TLS verified for that very
// host: 200 only when it serves with etcd behind it.
func (p *prober) readyz(ctx context.Context, dial dialFunc, addr string, timeout time.Duration) error {
	host, _, _ := net.SplitHostPort(addr)
	return get(ctx, dial, addr, &tls.Config{RootCAs: p.apiCA, ServerName: host, MinVersion: tls.VersionTLS12}, "/readyz", timeout, "")
}

// etcdHealth asks a member's /health, which is true only when the member
// has a leader and a quorum read succeeds.
func (p *prober) etcdHealth(ctx context.Context, dial dialFunc, addr string, timeout time.Duration) error {
	host, _, _ := net.SplitHostPort(addr)
	return get(ctx, dial, addr, &tls.Config{RootCAs: p.etcdCA, ServerName: host, Certificates: []tls.Certificate{p.etcdKey}, MinVersion: tls.VersionTLS12}, "/health", timeout, `"health":"true"`)
}

func get(ctx context.Context, dial dialFunc, addr string, tc *tls.Config, path string, timeout time.Duration, want string) error {
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) },
		TLSClientConfig:   tc,
		DisableKeepAlives: true, // every sample is a fresh connection, as a restarted client's would be
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if want != "" && !strings.Contains(string(body), want) {
		return fmt.Errorf("unhealthy: %s", strings.TrimSpace(string(body)))
	}
	return nil
}

// etcdClientCert mints a short-lived etcd client certificate from the
// bundle's etcd CA, as kubeadm's apiserver-etcd-client is: the drill needs
// no key from any node (the node holding it may be the one powered off).
func etcdClientCert(b *pki.Bundle) (tls.Certificate, error) {
	block, _ := pem.Decode(b.Talos.Certs.Etcd.Crt)
	if block == nil {
		return tls.Certificate{}, fmt.Errorf("etcd CA is not PEM")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	caKey, err := keyutil.ParsePrivateKeyPEM(b.Talos.Certs.Etcd.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "homelab-drill"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(2 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey.(crypto.Signer))
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
