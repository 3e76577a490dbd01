package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// issue returns a PEM certificate and key signed by c.
func issue(t *testing.T, c *pkitest.CA, cn string, usage x509.ExtKeyUsage, ips ...net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	return c.Issue(t, pkitest.Leaf{CN: cn, Usages: []x509.ExtKeyUsage{usage}, IPs: ips})
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd runs a real etcd on loopback that requires client
// certificates from c, and returns its client URL.
func startEtcd(t *testing.T, etcd string, c *pkitest.CA) string {
	dir := t.TempDir()
	crt, key := issue(t, c, "etcd-server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	for name, data := range map[string][]byte{"ca.crt": c.PEM, "server.crt": crt, "server.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	peer := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(etcd, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "test="+peer,
		"--cert-file", filepath.Join(dir, "server.crt"), "--key-file", filepath.Join(dir, "server.key"),
		"--trusted-ca-file", filepath.Join(dir, "ca.crt"), "--client-cert-auth", "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return client
}

// A real etcd: a client with the cluster's CA and a certificate it signed
// works through the caller's dialer; one that trusts another CA does not.
func TestNewAgainstEtcd(t *testing.T) {
	etcd := toolstest.Require(t, "etcd")
	c := pkitest.NewCA(t, "etcd-ca")
	url := startEtcd(t, etcd, c)
	crt, key := issue(t, c, "homelab-test", x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := New(ctx, []string{url}, c.PEM, pair, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var putErr error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, putErr = cli.Put(rctx, "/homelab/test", "ok")
		rcancel()
		if putErr == nil {
			break
		}
	}
	if putErr != nil {
		t.Fatalf("put through the client: %v", putErr)
	}
	got, err := cli.Get(ctx, "/homelab/test")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "ok" {
		t.Fatalf("get: %v %v", got, err)
	}
	if dials.Load() == 0 {
		t.Error("the client did not connect through the dialer it was given")
	}

	other := pkitest.NewCA(t, "etcd-ca")
	wrong, err := New(ctx, []string{url}, other.PEM, pair, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	if _, err := wrong.Get(wctx, "/homelab/test"); err == nil {
		t.Error("a client trusting another CA read from etcd")
	}

	if _, err := New(ctx, []string{url}, []byte("not a certificate"), pair, dial); err == nil {
		t.Error("a CA without a certificate was accepted")
	}
}
