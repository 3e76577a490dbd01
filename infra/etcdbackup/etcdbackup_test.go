package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type member struct {
	name, peer, client, dataDir string
	cmd                         *exec.Cmd
}

// startEtcd runs a real one-member etcd on loopback (plain HTTP: TLS is
// etcdclient's business) on dataDir, as a new cluster of token unless the
// directory already holds a member.
func startEtcd(t *testing.T, etcd, dataDir, token string, m *member) *member {
	if m == nil {
		m = &member{name: "cp-1", peer: "http://127.0.0.1:" + strconv.Itoa(freePort(t))}
	}
	m.client, m.dataDir = "http://127.0.0.1:"+strconv.Itoa(freePort(t)), dataDir
	m.cmd = exec.Command(etcd, "--name", m.name, "--data-dir", dataDir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer, "--initial-cluster", m.name+"="+m.peer,
		"--initial-cluster-token", token, "--log-level", "error")
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	return m
}

func (m *member) stop() {
	if m.cmd != nil && m.cmd.ProcessState == nil {
		m.cmd.Process.Kill()
		m.cmd.Wait()
	}
}

func (m *member) client_(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := cli.Get(ctx, "health"); err == nil {
			return cli
		} else if ctx.Err() != nil {
			t.Fatalf("etcd never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A real etcd: Save writes a snapshot that Check opens, with its
// metadata; a truncated, a foreign and a corrupted copy are refused with
// ErrNotSnapshot; the member's raw db opens only as raw. RestoreDataDir
// gives a data dir etcd starts on, with the snapshot's keys, a new cluster
// ID and the revision bumped past every old one.
func TestSaveCheckRestore(t *testing.T) {
	etcd := toolstest.Require(t, "etcd")
	work := t.TempDir()
	m := startEtcd(t, etcd, filepath.Join(work, "data"), "etcd-cluster", nil)
	cli := m.client_(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 50; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/test/cm-%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	oldID, _, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(work, "snap.db")
	meta, err := Save(ctx, cli, path, Metadata{Cluster: "homelab", Node: "cp-1"})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Revision < 51 || meta.ClusterID != fmt.Sprintf("%x", oldID) || len(meta.Members) != 1 || meta.Members[0].Name != "cp-1" {
		t.Errorf("metadata: %+v", meta)
	}
	if _, err := cli.Put(ctx, "/registry/configmaps/test/after", "v"); err != nil {
		t.Fatal(err)
	}
	read, err := ReadMetadata(path)
	if err != nil || read.SHA256 != meta.SHA256 || read.Revision != meta.Revision {
		t.Fatalf("metadata read back: %+v %v", read, err)
	}
	st, err := Check(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Checksummed || st.SHA256 != meta.SHA256 || st.Revision != meta.Revision || !st.Kubernetes {
		t.Errorf("status: %+v", st)
	}
	if sum, _ := os.ReadFile(SumPath(path)); string(sum) != meta.SHA256+"  snap.db\n" {
		t.Errorf("sha256 line: %q", sum)
	}

	checkIdentity(t, path, meta)

	data, _ := os.ReadFile(path)
	bad := map[string][]byte{
		"truncated": data[:len(data)/2],
		"foreign":   []byte("PK\x03\x04 this is a zip file, not etcd's\n"),
		"corrupted": append(append([]byte{}, data[:4096*3]...), append(make([]byte, len(data)-4096*3-32), data[len(data)-32:]...)...),
	}
	for name, b := range bad {
		p := filepath.Join(work, name+".db")
		os.WriteFile(p, b, 0o600)
		if _, err := Check(p, false); !errors.Is(err, ErrNotSnapshot) {
			t.Errorf("%s copy: %v, want ErrNotSnapshot", name, err)
		}
	}

	m.stop()
	raw := filepath.Join(m.dataDir, "member", "snap", "db")
	if _, err := Check(raw, false); !errors.Is(err, ErrNotSnapshot) {
		t.Errorf("a raw db checked as a snapshot: %v", err)
	}
	if st, err := Check(raw, true); err != nil || st.Revision < meta.Revision {
		t.Errorf("the raw db: %+v %v", st, err)
	}

	b := Bootstrap{Name: "cp-1", PeerURL: m.peer, Token: "homelab-restore-test"}
	dir, err := RestoreDataDir(path, false, b, filepath.Join(work, "restored"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Tarball(dir); err != nil {
		t.Fatal(err)
	}
	want, err := b.ClusterID()
	if err != nil {
		t.Fatal(err)
	}
	r := startEtcd(t, etcd, dir, "ignored-with-data", &member{name: "cp-1", peer: m.peer})
	rcli := r.client_(t)
	id, members, err := Members(ctx, rcli)
	if err != nil {
		t.Fatal(err)
	}
	if id != want || id == oldID || len(members) != 1 {
		t.Errorf("restored cluster %x (want %x, old %x), members %+v", id, want, oldID, members)
	}
	got, err := rcli.Get(ctx, "/registry/configmaps/test/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 50 || got.Header.Revision < RevisionBump {
		t.Errorf("restored: %d keys at revision %d, want the snapshot's 50 past %d", got.Count, got.Header.Revision, RevisionBump)
	}
}

// checkIdentity: a snapshot is the bundle's cluster's by its metadata (the
// CA pins, the cluster name, its checksum); without metadata it stands on
// its embedded checksum and data.
func checkIdentity(t *testing.T, path string, meta *Metadata) {
	b, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := pki.New()
	tg := Target{Inventory: &inventory.Inventory{Cluster: inventory.Cluster{Name: "homelab"}}, Bundle: b}
	want, err := tg.pins()
	if err != nil {
		t.Fatal(err)
	}
	good := *meta
	good.EtcdCA, good.ClusterCA = want.etcd, want.cluster
	for _, c := range []struct {
		name  string
		edit  func(m *Metadata)
		tg    Target
		words string
	}{
		{"this cluster's", func(m *Metadata) {}, tg, ""},
		{"another bundle", func(m *Metadata) {}, Target{Inventory: tg.Inventory, Bundle: other}, "other CAs"},
		{"another cluster name", func(m *Metadata) { m.Cluster = "lab2" }, tg, "cluster lab2"},
		{"changed since", func(m *Metadata) { m.SHA256 = "00" }, tg, "changed since"},
	} {
		m := good
		c.edit(&m)
		if err := writeSidecars(path, &m); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.tg.checkSnapshot(path, mustPins(t, c.tg))
		if (c.words == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	os.Remove(MetadataPath(path))
	if _, m, err := tg.checkSnapshot(path, want); err != nil || m != nil {
		t.Errorf("without metadata: %v %v", m, err)
	}
	if err := writeSidecars(path, meta); err != nil {
		t.Fatal(err)
	}
}

func mustPins(t *testing.T, tg Target) pins {
	p, err := tg.pins()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
