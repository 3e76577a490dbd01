package apiprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// serving is an apiserver's serving certificate for dns and ips, signed
// by c.
func serving(t *testing.T, c *pkitest.CA, dns []string, ips ...net.IP) tls.Certificate {
	t.Helper()
	return c.TLS(t, pkitest.Leaf{CN: "kube-apiserver", DNS: dns, IPs: ips, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// apiserver serves /readyz on loopback with a certificate for cp-1 and
// 127.0.0.1, answering status (and counting the connections it accepts).
func apiserver(t *testing.T, c *pkitest.CA, status *atomic.Int32, conns *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if s := int(status.Load()); s != http.StatusOK {
			http.Error(w, "[-]etcd failed: reason withheld\nreadyz check failed", s)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving(t, c, []string{"cp-1"}, net.IPv4(127, 0, 0, 1))}}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestReadyz(t *testing.T) {
	cluster, other := pkitest.NewCA(t, "kubernetes"), pkitest.NewCA(t, "kubernetes")
	var status, conns atomic.Int32
	status.Store(http.StatusOK)
	addr := apiserver(t, cluster, &status, &conns)
	_, port, _ := net.SplitHostPort(addr)

	// The node's name is checked as a SAN; the connection goes to its address.
	toServer := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		probe  Readyz
		addr   string
		ok     bool
		status int
	}{
		{"the address, verified for itself", Readyz{CA: cluster.Pool()}, addr, true, 0},
		{"a name it has, dialled elsewhere", Readyz{CA: cluster.Pool(), ServerName: "cp-1", Dial: toServer}, net.JoinHostPort("cp-1", port), true, 0},
		{"a name it lacks (the seed's moved node)", Readyz{CA: cluster.Pool(), ServerName: "10.0.0.140", Dial: toServer}, addr, false, 0},
		{"another cluster's CA", Readyz{CA: other.Pool()}, addr, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.probe.Check(ctx, tc.addr)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			var se *StatusError
			if errors.As(err, &se) {
				t.Errorf("a TLS failure taken for an answer: %v", err)
			}
		})
	}

	status.Store(http.StatusInternalServerError)
	err := Readyz{CA: cluster.Pool()}.Check(ctx, addr)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusInternalServerError || !strings.Contains(se.Body, "etcd failed") {
		t.Errorf("not ready: %v", err)
	}

	status.Store(http.StatusOK)
	before := conns.Load()
	p := Readyz{CA: cluster.Pool()}
	for range 3 {
		if err := p.Check(ctx, addr); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load() - before; n != 3 {
		t.Errorf("3 probes used %d connections, want a fresh one each", n)
	}

	if err := (Readyz{}).Check(ctx, addr); err == nil {
		t.Error("a probe without a CA succeeded")
	}
}

func TestReadyzTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepts, never answers the handshake
		}
	}()
	start := time.Now()
	err = Readyz{CA: pkitest.NewCA(t, "kubernetes").Pool(), Timeout: 200 * time.Millisecond}.Check(context.Background(), l.Addr().String())
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a silent server: %v after %v", err, time.Since(start))
	}
}

func TestServedCertificate(t *testing.T) {
	cluster := pkitest.NewCA(t, "kubernetes")
	var status, conns atomic.Int32
	status.Store(http.StatusOK)
	addr := apiserver(t, cluster, &status, &conns)
	leaf, err := ServedCertificate(context.Background(), nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(leaf.DNSNames, []string{"cp-1"}) {
		t.Errorf("served %v", leaf.DNSNames)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if _, err := ServedCertificate(context.Background(), nil, closed); err == nil {
		t.Error("a closed port served a certificate")
	}
}

// etcd requires a client certificate: with TLS 1.2 the handshake fails
// once the server has shown its own, which is still the answer.
func TestServedCertificateRequiringAClientCertificate(t *testing.T) {
	cluster := pkitest.NewCA(t, "kubernetes")
	for _, maxVersion := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
			Certificates: []tls.Certificate{serving(t, cluster, []string{"etcd-1"})},
			ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: cluster.Pool(), MaxVersion: maxVersion})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		leaf, err := ServedCertificate(context.Background(), nil, l.Addr().String())
		l.Close()
		if err != nil || !slices.Equal(leaf.DNSNames, []string{"etcd-1"}) {
			t.Errorf("TLS max %x: %v, %v", maxVersion, leaf, err)
		}
	}
}
