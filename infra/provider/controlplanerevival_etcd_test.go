package provider

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// The revival does not restart etcd, and waits for its quorum only once
// every member has its new certificates: what real etcd does says whether
// that is right. Three members whose peer certificates expired (a homelab
// that was off past the date, so no connection was already up) have no
// quorum; once their files are renewed in place, as regenerateCerts moves
// them, they elect a leader without being restarted.
func TestEtcdRegainsQuorumFromRenewedPeerCertificates(t *testing.T) {
	etcd := toolstest.Require(t, "etcd")
	ca := pkitest.NewCA(t, "etcd-ca")
	type member struct {
		name, dir, client, peer string
		cmd                     *exec.Cmd
	}
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	var ms []*member
	var cluster []string
	for _, name := range []string{"cp-1", "cp-2", "cp-3"} {
		m := &member{name: name, dir: t.TempDir(), client: "http://127.0.0.1:" + port(), peer: "https://127.0.0.1:" + port()}
		ms = append(ms, m)
		cluster = append(cluster, name+"="+m.peer)
		if err := os.WriteFile(filepath.Join(m.dir, "ca.crt"), ca.PEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// peerCerts writes every member's peer pair valid until notAfter, the
	// way regenerateCerts does (a new file renamed over the old).
	peerCerts := func(notAfter time.Time) {
		for _, m := range ms {
			crt, key := ca.Issue(t, pkitest.Leaf{CN: m.name, NotAfter: notAfter, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
			for name, data := range map[string][]byte{"peer.crt": crt, "peer.key": key} {
				tmp := filepath.Join(m.dir, name+".new")
				if err := os.WriteFile(tmp, data, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(m.dir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	start := func() {
		for _, m := range ms {
			m.cmd = exec.Command(etcd, "--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
				"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
				"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
				"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new", "--initial-cluster-token", "revival",
				"--peer-cert-file", filepath.Join(m.dir, "peer.crt"), "--peer-key-file", filepath.Join(m.dir, "peer.key"),
				"--peer-trusted-ca-file", filepath.Join(m.dir, "ca.crt"), "--peer-client-cert-auth", "--log-level", "error")
			if err := m.cmd.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := func() {
		for _, m := range ms {
			if m.cmd != nil {
				m.cmd.Process.Kill()
				m.cmd.Wait()
				m.cmd = nil
			}
		}
	}
	t.Cleanup(stop)
	// leaders asks each member for its leader; 0 when it has none.
	leaders := func() []uint64 {
		var out []uint64
		for _, m := range ms {
			var leader uint64
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if s, err := cli.Status(ctx, m.client); err == nil {
					leader = s.Leader
				}
				cancel()
				cli.Close()
			}
			out = append(out, leader)
		}
		return out
	}
	quorum := func(within time.Duration) bool {
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if l := leaders(); l[0] != 0 && l[0] == l[1] && l[1] == l[2] {
				return true
			}
		}
		return false
	}

	peerCerts(time.Now().Add(time.Hour))
	start()
	if !quorum(30 * time.Second) {
		t.Fatal("three members with valid peer certificates elected no leader")
	}
	stop()

	peerCerts(time.Now().Add(-time.Minute))
	start()
	if quorum(10 * time.Second) {
		t.Fatal("members whose peer certificates expired kept a quorum: the revival's premise is wrong")
	}
	peerCerts(time.Now().Add(time.Hour))
	began := time.Now()
	if !quorum(60 * time.Second) {
		t.Fatalf("renewed peer certificates in place: no leader within 60 s without a restart (leaders %v)", leaders())
	}
	t.Logf("figures: leader elected %s after the peer certificates were renewed in place", time.Since(began).Round(100*time.Millisecond))
}
