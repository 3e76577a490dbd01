package drill

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

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
	p.etcdKey, err = b.EtcdClient("homelab-drill", 2*time.Hour)
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
