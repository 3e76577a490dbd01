// Package apiprobe asks a kube-apiserver's HTTPS port directly, not as a
// client of the API: is /readyz answered with a certificate that the
// cluster CA signed for one given name, and which certificate is served.
// The provider (after moving a node), verify (every name the API must
// answer at) and the drill (sampling during a failure) ask the same
// question, with their own dialers: through SSH, from a lab namespace.
package apiprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// DefaultTimeout bounds a probe whose Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Readyz is how to ask one apiserver's /readyz.
type Readyz struct {
	// CA is the only trust: the cluster CA, pinned.
	CA *x509.CertPool
	// ServerName is the name the certificate must be valid for; default
	// the host of the address asked. A name other than the dialled
	// address checks a SAN without needing DNS.
	ServerName string
	// Dial opens the connection (through SSH, from a namespace); default
	// a plain dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the whole request; default DefaultTimeout.
	Timeout time.Duration
}

// StatusError is an answer other than 200: the server is up, not ready.
type StatusError struct {
	Path string
	Code int
	// Body is the start of what it said (the checks that failed).
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("%s: HTTP %d", e.Path, e.Code)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Path, e.Code, e.Body)
}

// Check asks addr (host:port) once, on a fresh connection: nil only when
// the apiserver answers 200 with a certificate CA signed for ServerName.
func (r Readyz) Check(ctx context.Context, addr string) error {
	if r.CA == nil {
		return errors.New("apiprobe: no CA to verify the apiserver against")
	}
	name := r.ServerName
	if name == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		name = host
	}
	dial := r.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return get(ctx, dial, addr, "/readyz", &tls.Config{RootCAs: r.CA, ServerName: name, MinVersion: tls.VersionTLS12}, timeout)
}

// Healthz asks a component whose serving certificate cannot be verified
// (the controller-manager's and scheduler's are self-signed in memory at
// each start) for path on addr, once, on a fresh connection: nil only on
// 200. The question is only whether the process runs and answers.
func Healthz(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, path string) error {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return get(ctx, dial, addr, path, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, DefaultTimeout)
}

func get(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, path string, tc *tls.Config, timeout time.Duration) error {
	tr := &http.Transport{
		DialContext:     func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, addr) },
		TLSClientConfig: tc,
		// A probe stands for a client that connects now: a connection
		// kept from an earlier probe would hide a restart.
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &StatusError{Path: path, Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return nil
}

// ServedCertificate makes a TLS handshake with addr and returns the leaf
// certificate served there, unverified: the caller compares it, to tell
// "no answer" from "answers with the wrong certificate". A server that
// requires a client certificate (etcd) has shown its own before it ends
// the handshake: that one is returned.
func ServedCertificate(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	raw, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var shown []byte
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			if len(rawCerts) > 0 {
				shown = rawCerts[0]
			}
			return nil
		}})
	err = conn.HandshakeContext(ctx)
	if shown != nil {
		return x509.ParseCertificate(shown)
	}
	if err != nil {
		return nil, err
	}
	return nil, errors.New("no certificate")
}
