package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// issue returns a PEM certificate and its key, signed by ca, for serving
// and client auth (etcd's peer certificate is both) on loopback.
func issue(t *testing.T, ca *pkitest.CA, cn string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.Issue(t, pkitest.Leaf{CN: cn, NotAfter: notAfter, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
}

func parsed(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := nodefacts.ParseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServedVerdict(t *testing.T) {
	ca := pkitest.NewCA(t, "etcd-ca")
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	oldPEM, _ := issue(t, ca, "kube-apiserver", until)
	renewedPEM, _ := issue(t, ca, "kube-apiserver", until.Add(8760*time.Hour))
	twinPEM, _ := issue(t, ca, "kube-apiserver", until) // renewed the same second
	old, renewed, twin := parsed(t, oldPEM), parsed(t, renewedPEM), parsed(t, twinPEM)
	path := nodefacts.PKIFile(nodefacts.APIServerCert)
	for _, tc := range []struct {
		name         string
		file, served *x509.Certificate
		want         Status
		saying       []string
	}{
		{"serves its file", old, old, OK, []string{path, serialOf(old), servedStamp(old.NotAfter)}},
		{"file renewed, server not reloaded", renewed, old, Fail, []string{"not yet reloaded", servedStamp(old.NotAfter), servedStamp(renewed.NotAfter)}},
		{"file older than the server's", old, renewed, Fail, []string{"older than what runs", servedStamp(renewed.NotAfter)}},
		// The subject and dates agree: only the serial tells them apart.
		{"same dates, another certificate", twin, old, Fail, []string{serialOf(old), serialOf(twin)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, detail := servedVerdict(path, tc.file, tc.served)
			if st != tc.want {
				t.Errorf("%s %q, want %s", st, detail, tc.want)
			}
			for _, s := range tc.saying {
				if !strings.Contains(detail, s) {
					t.Errorf("%q does not say %q", detail, s)
				}
			}
		})
	}
}

// servedDoctor is a doctor of one control-plane node cp-1 at 10.0.0.11
// whose probe read files, and whose dialler reaches only the ports in
// routes (node port -> a loopback listener): any other is refused.
func servedDoctor(files map[string][]byte, routes map[int]string) *doctor {
	n := inventory.Node{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.11"}
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Endpoint: inventory.Endpoint{Port: 6443}}, Nodes: []inventory.Node{n}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		to, ok := routes[p]
		if host != n.Address || !ok {
			return nil, errors.New("connection refused (test)")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
	f := &nodeFacts{node: n, reached: true, primary: n.Address, live: nodefacts.Live{Files: files}}
	return &doctor{t: Target{Inventory: inv, Dial: dial}, r: &Report{}, nodes: map[string]*nodeFacts{n.Name: f}}
}

// serveTLS serves whichever certificate *current holds, on loopback, until
// the test ends: a server that reloads its certificate by itself.
func serveTLS(t *testing.T, current *atomic.Pointer[tls.Certificate]) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return current.Load(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func pair(t *testing.T, certPEM, keyPEM []byte) *tls.Certificate {
	t.Helper()
	p, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func rows(r *Report, check string) map[string]Finding {
	m := map[string]Finding{}
	for _, f := range r.Findings {
		if f.Check == check {
			m[f.Where] = f
		}
	}
	return m
}

// Through the real handshake code: an apiserver that serves the
// certificate its file held before a renewal fails, and passes once it
// has reloaded the file; one that does not answer adds no row (api tls
// reports it).
func TestCheckServedAgainstTLSListener(t *testing.T) {
	ctx := context.Background()
	ca := pkitest.NewCA(t, "etcd-ca")
	api := nodefacts.PKIFile(nodefacts.APIServerCert)
	oldCrt, oldKey := issue(t, ca, "kube-apiserver", time.Now().Add(time.Hour))
	newCrt, newKey := issue(t, ca, "kube-apiserver", time.Now().Add(8760*time.Hour))
	var current atomic.Pointer[tls.Certificate]
	current.Store(pair(t, oldCrt, oldKey))
	at := serveTLS(t, &current)

	d := servedDoctor(map[string][]byte{api: oldCrt}, map[int]string{6443: at})
	d.checkServed(ctx)
	if got := rows(d.r, "cert served"); len(got) != 1 || got["cp-1:6443"].Status != OK || len(d.r.Causes) != 0 {
		t.Fatalf("serving its file: %+v, causes %v", d.r.Findings, d.r.Causes)
	}

	// The file renewed, the server not yet.
	d = servedDoctor(map[string][]byte{api: newCrt}, map[int]string{6443: at})
	d.checkServed(ctx)
	row := rows(d.r, "cert served")["cp-1:6443"]
	if row.Status != Fail || !strings.Contains(row.Detail, "not yet reloaded") || d.r.OK() {
		t.Errorf("stale server: %+v", row)
	}
	if len(d.r.Causes) != 1 {
		t.Fatalf("causes %v", d.r.Causes)
	}
	for _, s := range []string{"cp-1", "10.0.0.11:6443", nodefacts.Manifest(nodefacts.KubeAPIServer), "--renew-certificates=cp-1"} {
		if !strings.Contains(d.r.Causes[0], s) {
			t.Errorf("the cause does not name %q: %s", s, d.r.Causes[0])
		}
	}

	// Reloaded.
	current.Store(pair(t, newCrt, newKey))
	d = servedDoctor(map[string][]byte{api: newCrt}, map[int]string{6443: at})
	d.checkServed(ctx)
	if row := rows(d.r, "cert served")["cp-1:6443"]; row.Status != OK {
		t.Errorf("reloaded: %+v", row)
	}

	// Not answering: api tls' row, not this one's.
	d = servedDoctor(map[string][]byte{api: newCrt}, nil)
	d.checkServed(ctx)
	if got := rows(d.r, "cert served"); len(got) != 0 {
		t.Errorf("an apiserver that does not answer got rows %+v", got)
	}

	// A manifest that names another file is named in the cause.
	d = servedDoctor(map[string][]byte{api: newCrt, nodefacts.Manifest(nodefacts.KubeAPIServer): []byte(`spec:
  containers:
  - name: kube-apiserver
    command: [kube-apiserver, --tls-cert-file=/etc/kubernetes/pki/other.crt]
`)}, map[int]string{6443: at})
	current.Store(pair(t, oldCrt, oldKey))
	d.checkServed(ctx)
	if len(d.r.Causes) != 1 || !strings.Contains(d.r.Causes[0], "/etc/kubernetes/pki/other.crt") {
		t.Errorf("causes %v do not name the manifest's file", d.r.Causes)
	}
}

// etcd's two ports: one that answers while the other does not is a
// warning on the silent one (nothing else reports a peer port); a node
// whose files were not read gets no row.
func TestCheckServedEtcdPorts(t *testing.T) {
	ctx := context.Background()
	ca := pkitest.NewCA(t, "etcd-ca")
	crt, key := issue(t, ca, "cp-1", time.Now().Add(time.Hour))
	peer, _ := issue(t, ca, "cp-1", time.Now().Add(time.Hour))
	var current atomic.Pointer[tls.Certificate]
	current.Store(pair(t, crt, key))
	at := serveTLS(t, &current)
	d := servedDoctor(map[string][]byte{nodefacts.PKIFile(nodefacts.EtcdServerCert): crt, nodefacts.PKIFile(nodefacts.EtcdPeerCert): peer},
		map[int]string{nodefacts.EtcdClientPort: at})
	d.checkServed(ctx)
	got := rows(d.r, "cert served")
	if got["cp-1:2379"].Status != OK || got["cp-1:2380"].Status != Warn || len(got) != 2 || !d.r.OK() {
		t.Errorf("client port answering, peer port silent: %+v", d.r.Findings)
	}

	d = servedDoctor(nil, map[int]string{nodefacts.EtcdClientPort: at})
	d.nodes["cp-1"].reached = false
	d.checkServed(ctx)
	if len(d.r.Findings) != 0 {
		t.Errorf("an unreached node got rows %+v", d.r.Findings)
	}
}

// A real etcd, which asks for a client certificate: the certificate it
// serves on its client and peer ports is compared with the files; a file
// renewed behind it fails until etcd serves it, which it does at its next
// handshake without a restart (what the cause tells the operator).
func TestCheckServedAgainstEtcd(t *testing.T) {
	etcd := toolstest.Require(t, "etcd")
	ctx := context.Background()
	ca := pkitest.NewCA(t, "etcd-ca")
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A renewal replaces a file by renaming a new one over it, as
	// homelab up's does: never half written.
	replace := func(name string, data []byte) {
		t.Helper()
		write(name+".new", data)
		if err := os.Rename(filepath.Join(dir, name+".new"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	serverCrt, serverKey := issue(t, ca, "cp-1", time.Now().Add(time.Hour))
	peerCrt, peerKey := issue(t, ca, "cp-1", time.Now().Add(time.Hour))
	write("ca.crt", ca.PEM)
	write("server.crt", serverCrt)
	write("server.key", serverKey)
	write("peer.crt", peerCrt)
	write("peer.key", peerKey)
	client := "127.0.0.1:" + strconv.Itoa(freePort(t))
	peerAt := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := func(name string) string { return filepath.Join(dir, name) }
	cmd := exec.Command(etcd, "--name", "cp-1", "--data-dir", p("data"),
		"--listen-client-urls", "https://"+client, "--advertise-client-urls", "https://"+client,
		"--listen-peer-urls", "https://"+peerAt, "--initial-advertise-peer-urls", "https://"+peerAt, "--initial-cluster", "cp-1=https://"+peerAt,
		"--cert-file", p("server.crt"), "--key-file", p("server.key"), "--trusted-ca-file", p("ca.crt"), "--client-cert-auth",
		"--peer-cert-file", p("peer.crt"), "--peer-key-file", p("peer.key"), "--peer-trusted-ca-file", p("ca.crt"), "--peer-client-cert-auth",
		"--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, at := range []string{client, peerAt} {
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err = apiprobe.ServedCertificate(ctx, nil, at); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("etcd does not serve at %s: %v", at, err)
		}
	}
	routes := map[int]string{nodefacts.EtcdClientPort: client, nodefacts.EtcdPeerPort: peerAt}
	// What the probe would read on the node now.
	probe := func() map[string][]byte {
		server, _ := os.ReadFile(p("server.crt"))
		peer, _ := os.ReadFile(p("peer.crt"))
		return map[string][]byte{nodefacts.PKIFile(nodefacts.EtcdServerCert): server, nodefacts.PKIFile(nodefacts.EtcdPeerCert): peer}
	}
	check := func(files map[string][]byte) map[string]Finding {
		d := servedDoctor(files, routes)
		d.checkServed(ctx)
		return rows(d.r, "cert served")
	}

	if got := check(probe()); got["cp-1:2379"].Status != OK || got["cp-1:2380"].Status != OK {
		t.Fatalf("etcd serving its files: %+v", got)
	}

	renewedCrt, renewedKey := issue(t, ca, "cp-1", time.Now().Add(8760*time.Hour))
	files := probe()
	files[nodefacts.PKIFile(nodefacts.EtcdServerCert)] = renewedCrt
	got := check(files)
	if row := got["cp-1:2379"]; row.Status != Fail || !strings.Contains(row.Detail, "not yet reloaded") {
		t.Errorf("a renewed file etcd has not read: %+v", row)
	}
	if got["cp-1:2380"].Status != OK {
		t.Errorf("the peer port, whose file did not change: %+v", got["cp-1:2380"])
	}

	// The renewal lands: key first, then the certificate, as a pair that
	// matches only once both are in place.
	replace("server.key", renewedKey)
	replace("server.crt", renewedCrt)
	if got := check(probe()); got["cp-1:2379"].Status != OK {
		t.Errorf("etcd after its files were renewed (no restart): %+v", got["cp-1:2379"])
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
