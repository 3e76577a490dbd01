package drill

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/lab"
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
	// names are the lab's namespaces, where the consumers run.
	names   lab.Names
	apiCA   *x509.CertPool
	etcdCA  *x509.CertPool
	etcdKey tls.Certificate
}

func newProber(b *pki.Bundle, names lab.Names) (*prober, error) {
	p := &prober{names: names, apiCA: x509.NewCertPool(), etcdCA: x509.NewCertPool()}
	p.apiCA.AppendCertsFromPEM(b.Talos.Certs.K8s.Crt)
	p.etcdCA.AppendCertsFromPEM(b.Talos.Certs.Etcd.Crt)
	var err error
	p.etcdKey, err = b.EtcdClient("homelab-drill", 2*time.Hour)
	return p, err
}

// readyz asks addr's apiserver /readyz with TLS verified for that very
// host: 200 only when it serves with etcd behind it.
func (p *prober) readyz(ctx context.Context, dial dialFunc, addr string, timeout time.Duration) error {
	return apiprobe.Readyz{CA: p.apiCA, Dial: dial, Timeout: timeout}.Check(ctx, addr)
}

func (p *prober) etcdTLS(addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	return &tls.Config{RootCAs: p.etcdCA, ServerName: host, Certificates: []tls.Certificate{p.etcdKey}, MinVersion: tls.VersionTLS12}
}

// etcdHealth asks a member's /health, which is true only when the member
// has a leader and a quorum read succeeds. A member that answers "false"
// returns an *httpError: it is up, not healthy.
func (p *prober) etcdHealth(ctx context.Context, dial dialFunc, addr string, timeout time.Duration) error {
	body, err := call(ctx, dial, addr, p.etcdTLS(addr), http.MethodGet, "/health", nil, timeout)
	if err != nil {
		return err
	}
	var h struct{ Health, Reason string }
	if json.Unmarshal(body, &h) != nil || h.Health != "true" {
		return &httpError{status: http.StatusOK, body: strings.TrimSpace(string(body))}
	}
	return nil
}

// etcdLeader returns the ID of the leader the member follows ("" when it
// has none), from its status (the gRPC gateway's Maintenance/Status).
func (p *prober) etcdLeader(ctx context.Context, dial dialFunc, addr string, timeout time.Duration) (string, error) {
	body, err := call(ctx, dial, addr, p.etcdTLS(addr), http.MethodPost, "/v3/maintenance/status", []byte("{}"), timeout)
	if err != nil {
		return "", err
	}
	var st struct{ Leader string }
	if err := json.Unmarshal(body, &st); err != nil {
		return "", err
	}
	if st.Leader == "0" {
		return "", nil
	}
	return st.Leader, nil
}

// etcdReadable does a serializable read of key at the member: served from
// its own copy, without a leader or quorum. Nil when the key is there.
func (p *prober) etcdReadable(ctx context.Context, dial dialFunc, addr, key string, timeout time.Duration) error {
	req, _ := json.Marshal(map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key)), "serializable": true, "keys_only": true})
	body, err := call(ctx, dial, addr, p.etcdTLS(addr), http.MethodPost, "/v3/kv/range", req, timeout)
	if err != nil {
		return err
	}
	var rr struct{ Kvs []json.RawMessage }
	if err := json.Unmarshal(body, &rr); err != nil {
		return err
	}
	if len(rr.Kvs) == 0 {
		return fmt.Errorf("%s: no %s", addr, key)
	}
	return nil
}

// httpError is an answer that is not a success: the server is up.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func isHTTPError(err error) bool {
	var h *httpError
	return errors.As(err, &h)
}

func call(ctx context.Context, dial dialFunc, addr string, tc *tls.Config, method, path string, body []byte, timeout time.Duration) ([]byte, error) {
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) },
		TLSClientConfig:   tc,
		DisableKeepAlives: true, // every sample is a fresh connection, as a restarted client's would be
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "https://"+addr+path, bytes.NewReader(body))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &httpError{status: resp.StatusCode, body: strings.TrimSpace(string(data))}
	}
	return data, nil
}
