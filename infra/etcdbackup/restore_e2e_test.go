package etcdbackup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/infra/verify"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/pki"
)

func TestMain(m *testing.M) { labtest.Main(m) }

func needE2E(t testing.TB) { labtest.Need(t, "pulumi", "kubeadm", "etcd") }

// The snapshot timer's interval in the lab: short, so the test sees
// several runs (and the retention) within a minute.
const (
	interval = 15 * time.Second
	keep     = 2
	ns       = "restore-test"
)

type drill struct {
	t        testing.TB
	lab      *labtest.Lab
	stateDir string
	cmdLog   string
	log      *bytes.Buffer
	inv      string
	// macs are the MACs of replaced machines, written into the inventory
	// as a user would.
	macs map[string]string
}

func newDrill(t testing.TB, ctx context.Context) *drill {
	d := &drill{t: t, log: &bytes.Buffer{}, macs: map[string]string{}}
	d.lab = labtest.Up(t, ctx, "etcd", func() { t.Logf("engine output (tail):\n%s", tail(d.log.String(), 120)) })
	d.stateDir, d.cmdLog = filepath.Join(d.lab.Work, "state"), filepath.Join(d.lab.Work, "commands.log")
	t.Setenv(ssh.CommandLogEnv, d.cmdLog)
	return d
}

// replace powers nodes off, then gives each a new disk (and the MAC the
// lab gave it, written into the inventory as a user would).
func (d *drill) replace(ctx context.Context, nodes ...string) {
	d.t.Helper()
	for _, n := range nodes {
		if err := d.lab.PowerOff(n); err != nil {
			d.t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := d.lab.Replace(ctx, n); err != nil {
			d.t.Fatal(err)
		}
		if err := d.lab.AcceptHostKey(ctx, n); err != nil {
			d.t.Fatal(err)
		}
		d.macs[n] = d.labMAC(n)
	}
}

func (d *drill) inventory() string {
	return d.lab.Inventory("lab", func(s string) string {
		s = strings.Replace(s, "  extraSANs: []", fmt.Sprintf("  extraSANs: []\n  etcd: {snapshots: {schedule: %s, keep: %d}}", interval, keep), 1)
		for node, mac := range d.macs {
			s = replaceMAC(s, node, mac)
		}
		return s
	})
}

func replaceMAC(s, node, mac string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "{name: "+node+",") {
			i := strings.Index(l, `mac: "`)
			j := strings.Index(l[i+6:], `"`)
			l = l[:i+6] + mac + l[i+6+j:]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func (d *drill) open(ctx context.Context) *stack.Stack {
	d.t.Helper()
	d.inv = d.inventory()
	s, err := stack.Open(ctx, stack.Options{Inventory: d.inv, StateDir: d.stateDir, Progress: d.log})
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func (d *drill) up(ctx context.Context, s *stack.Stack) map[string]int {
	d.t.Helper()
	start := time.Now()
	res, err := s.Up(ctx, true)
	if err != nil {
		d.t.Fatalf("up: %v", err)
	}
	d.t.Logf("figures: up took %s: %v", time.Since(start).Round(time.Millisecond), *res.Summary.ResourceChanges)
	return *res.Summary.ResourceChanges
}

func (d *drill) noChanges(ctx context.Context, s *stack.Stack, what string) {
	d.t.Helper()
	labtest.Mutating(d.cmdLog)
	for op, n := range d.up(ctx, s) {
		if op != "same" && n > 0 {
			d.t.Errorf("%s: the next up made %d %s", what, n, op)
		}
	}
}

func (d *drill) target(s *stack.Stack, bundle *pki.Bundle) etcdbackup.Target {
	key, err := os.ReadFile(d.lab.KeyPath())
	if err != nil {
		d.t.Fatal(err)
	}
	if bundle == nil {
		bundle = s.Bundle
	}
	return etcdbackup.Target{Inventory: s.Inv, Bundle: bundle, PrivateKey: key, KnownHosts: d.lab.KnownHostsPath(),
		Dial: d.lab.Dial, CommandLog: d.cmdLog,
		History: filepath.Join(d.stateDir, s.Inv.Cluster.Name, etcdbackup.HistoryFile), Log: testLog{d.t}}
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (d *drill) verify(ctx context.Context, s *stack.Stack) *verify.Report {
	d.t.Helper()
	kc := d.kubeconfig(ctx, s)
	var rep *verify.Report
	var err error
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rep, err = verify.Run(ctx, verify.Target{Inventory: s.Inv, Bundle: s.Bundle, Kubeconfig: kc, Dial: d.lab.Dial})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Second)
	}
	if err != nil {
		d.t.Fatalf("verify: %v", err)
	}
	return rep
}

func (d *drill) kubeconfig(ctx context.Context, s *stack.Stack) []byte {
	outs, err := s.Outputs(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	return []byte(kc)
}

func (d *drill) clientset(ctx context.Context, s *stack.Stack) *kubernetes.Clientset {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(d.kubeconfig(ctx, s))
	if err != nil {
		d.t.Fatal(err)
	}
	cfg.Dial = d.lab.Dial
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	return cs
}

// writeConfigMaps creates ConfigMaps ns/cm-FROM .. cm-(TO-1).
func (d *drill) writeConfigMaps(ctx context.Context, cs *kubernetes.Clientset, from, to int) {
	d.t.Helper()
	for i := from; i < to; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Namespace: ns}, Data: map[string]string{"i": strconv.Itoa(i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			d.t.Fatalf("creating %s: %v", cm.Name, err)
		}
	}
}

// configMaps counts ns's ConfigMaps named cm-*, retrying while the API
// comes back.
func (d *drill) configMaps(ctx context.Context, s *stack.Stack) map[string]bool {
	d.t.Helper()
	cs := d.clientset(ctx, s)
	var list *corev1.ConfigMapList
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		if list, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			out[cm.Name] = true
		}
	}
	return out
}

// etcdOf is a client of one node's etcd member through its SSH connection.
func (d *drill) etcdOf(ctx context.Context, node string) (*clientv3.Client, func()) {
	d.t.Helper()
	key, err := os.ReadFile(d.lab.KeyPath())
	if err != nil {
		d.t.Fatal(err)
	}
	st, err := d.lab.LoadState()
	if err != nil {
		d.t.Fatal(err)
	}
	n, err := st.Node(node)
	if err != nil {
		d.t.Fatal(err)
	}
	c, err := ssh.Dial(ctx, ssh.Target{Name: node, Address: n.Address, Port: 22, User: "root", PrivateKey: key, KnownHosts: d.lab.KnownHostsPath()}, ssh.WithDialer(d.lab.Dial))
	if err != nil {
		d.t.Fatal(err)
	}
	cli, err := etcdclient.ThroughSSH(ctx, c)
	if err != nil {
		d.t.Fatal(err)
	}
	return cli, func() { cli.Close(); c.Close() }
}

// checkEtcd: three started, healthy voting members, all in cluster id.
func (d *drill) checkEtcd(ctx context.Context, id string) {
	d.t.Helper()
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		cli, done := d.etcdOf(ctx, n)
		h, err := etcdbackup.MemberHealth(ctx, cli)
		_, members, merr := etcdbackup.Members(ctx, cli)
		done()
		if err != nil || merr != nil {
			d.t.Fatalf("%s: %v %v", n, err, merr)
		}
		if !h.Healthy() || fmt.Sprintf("%x", h.ClusterID) != id || len(members) != 3 {
			d.t.Errorf("%s: healthy %v, cluster %x (want %s), members %+v", n, h.Healthy(), h.ClusterID, id, members)
		}
		for _, m := range members {
			if m.Learner || m.Name == "" {
				d.t.Errorf("%s: member %+v is not a started voting member", n, m)
			}
		}
	}
}

// refused runs a restore that must fail with want in its error and make
// no mutating command.
func (d *drill) refused(ctx context.Context, what string, t etcdbackup.Target, o etcdbackup.RestoreOptions, want ...string) {
	d.t.Helper()
	labtest.Mutating(d.cmdLog)
	_, err := etcdbackup.Restore(ctx, t, o)
	if err == nil {
		d.t.Fatalf("%s: the restore went ahead", what)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			d.t.Errorf("%s: the refusal does not say %q: %v", what, w, err)
		}
	}
	if m := labtest.Mutating(d.cmdLog); len(m) > 0 {
		d.t.Errorf("%s: refused, yet %d mutating commands ran: %v", what, len(m), m)
	}
	d.t.Logf("%s: refused: %v", what, err)
}

// scheduled waits until every control-plane node's timer saved more than
// keep snapshots, then checks only keep are left, each complete.
func (d *drill) scheduled(ctx context.Context) {
	d.t.Helper()
	start := time.Now()
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		var names []string
		for deadline := time.Now().Add(keep*interval + 2*interval); ; time.Sleep(time.Second) {
			log, _ := d.lab.Run(ctx, n, "{ journalctl -q -o cat -u "+etcdsnapshot.Service+"; cat /var/log/homelab/homelab-etcd-snapshot.log; } 2>/dev/null | grep -c '^saved '")
			out, _ := d.lab.Run(ctx, n, "ls -1 "+etcdsnapshot.Dir+" | grep -E '"+etcdsnapshot.NamePattern+"'")
			names = strings.Fields(out)
			runs, _ := strconv.Atoi(strings.TrimSpace(log))
			if runs > keep {
				break
			}
			if time.Now().After(deadline) {
				d.t.Fatalf("%s: %d scheduled snapshots in %s (%d runs logged), want more than %d runs", n, len(names), time.Since(start).Round(time.Second), runs, keep)
			}
		}
		if len(names) != keep {
			d.t.Errorf("%s keeps %v, want the newest %d", n, names, keep)
		}
		for _, name := range names {
			base := strings.TrimSuffix(name, ".db")
			if out, err := d.lab.Run(ctx, n, "cd "+etcdsnapshot.Dir+" && sha256sum -c "+name+".sha256 && test -s "+base+etcdsnapshot.EtcdStatusSuffix); err != nil {
				d.t.Errorf("%s: %s incomplete: %v %s", n, name, err, out)
			}
		}
	}
	d.t.Logf("figures: every control-plane node had run its snapshot timer %d+ times %s after up", keep+1, time.Since(start).Round(time.Second))
}

// TestRestoreInTheLab is issue 14's drill: scheduled snapshots on every
// control-plane node with retention; 200 ConfigMaps, a snapshot, 50 more;
// every bad restore refused with no mutating command; two control-plane
// nodes powered off and replaced, quorum lost, and one restore (then up)
// brings the 200 back without the 50 in a new etcd cluster of three
// healthy members, verify passing and the next up a no-op. Then the same
// from a surviving member's raw db with one node left, the third back
// later and rejoined.
func TestRestoreInTheLab(t *testing.T) {
	labtest.Long(t, "two restores from quorum loss hold the lab about 9 minutes")
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	d := newDrill(t, ctx)
	s := d.open(ctx)
	d.up(ctx, s)
	d.verify(ctx, s)
	d.scheduled(ctx)
	tg := d.target(s, nil)
	d.doctorSnapshots(ctx, tg)

	fetched := filepath.Join(d.lab.Work, "fetched")
	os.MkdirAll(fetched, 0o700)
	fm, fpath, err := etcdbackup.Fetch(ctx, tg, fetched)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if fm.ClusterID == "" || len(fm.Members) != 3 || fm.Revision == 0 {
		t.Errorf("fetched %s: %+v", fpath, fm)
	}

	cs := d.clientset(ctx, s)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	d.writeConfigMaps(ctx, cs, 0, 200)
	snap := filepath.Join(d.lab.Work, "homelab.db")
	start := time.Now()
	meta, err := etcdbackup.Take(ctx, tg, snap, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: snapshot with 200 ConfigMaps: %d bytes, revision %d, %s", meta.Size, meta.Revision, time.Since(start).Round(time.Millisecond))
	oldID := meta.ClusterID
	d.writeConfigMaps(ctx, cs, 200, 250)

	d.badInputs(ctx, s, tg, snap)

	// Two control-plane nodes lose power and get new disks: quorum is gone.
	d.replace(ctx, "cp-2", "cp-3")
	lost := time.Now()
	s = d.open(ctx)
	tg = d.target(s, nil)
	rep, err := etcdbackup.Restore(ctx, tg, etcdbackup.RestoreOptions{From: snap})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Logf("restored: %+v", *rep)
	if rep.Revision != meta.Revision || rep.Node != "cp-1" || rep.NewClusterID == oldID || strings.Join(rep.Rejoin, ",") != "cp-2,cp-3" {
		t.Errorf("report: revision %d (snapshot's %d), node %s, cluster %s (old %s), rejoin %v", rep.Revision, meta.Revision, rep.Node, rep.NewClusterID, oldID, rep.Rejoin)
	}
	d.up(ctx, s)
	d.verify(ctx, s)
	t.Logf("figures: restore from two control-plane nodes powered off and replaced to verify passing: %s (restore %s)", time.Since(lost).Round(time.Millisecond), rep.Took.Round(time.Millisecond))
	d.checkEtcd(ctx, rep.NewClusterID)
	cms := d.configMaps(ctx, s)
	if len(cms) != 200 || !cms["cm-0000"] || !cms["cm-0199"] || cms["cm-0200"] {
		t.Errorf("after the restore %d ConfigMaps (want the snapshot's 200, none of the 50 after it)", len(cms))
	}
	d.noChanges(ctx, s, "after the restore")

	// The same from a raw db with one node left: cp-1 and cp-3 lose
	// power, cp-1 gets a new disk, cp-3 comes back only after the restore
	// with its old member (of the lost cluster) and is rejoined.
	d.writeConfigMaps(ctx, d.clientset(ctx, s), 300, 310)
	for _, n := range []string{"cp-1", "cp-3"} {
		if err := d.lab.PowerOff(n); err != nil {
			t.Fatal(err)
		}
	}
	lost = time.Now()
	if err := d.lab.Replace(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if err := d.lab.AcceptHostKey(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	d.macs["cp-1"] = d.labMAC("cp-1")
	s = d.open(ctx)
	tg = d.target(s, nil)
	rep2, err := etcdbackup.Restore(ctx, tg, etcdbackup.RestoreOptions{FromData: "cp-2"})
	if err != nil {
		t.Fatalf("restore --from-data: %v", err)
	}
	t.Logf("restored: %+v", *rep2)
	if rep2.Node != "cp-2" || rep2.NewClusterID == rep.NewClusterID || strings.Join(rep2.Unreachable, ",") != "cp-3" || strings.Join(rep2.Rejoin, ",") != "cp-1" {
		t.Errorf("report: %+v", *rep2)
	}
	if err := d.lab.PowerOn(ctx, "cp-3"); err != nil {
		t.Fatal(err)
	}
	if err := etcdbackup.Rejoin(ctx, tg, "cp-3"); err != nil {
		t.Fatalf("rejoin cp-3: %v", err)
	}
	d.up(ctx, s)
	d.verify(ctx, s)
	t.Logf("figures: restore from cp-2's raw db to verify passing: %s (restore %s)", time.Since(lost).Round(time.Millisecond), rep2.Took.Round(time.Millisecond))
	d.checkEtcd(ctx, rep2.NewClusterID)
	cms = d.configMaps(ctx, s)
	if len(cms) != 210 || !cms["cm-0309"] {
		t.Errorf("after the raw-db restore %d ConfigMaps, want 210 (nothing lost: the db was the live data)", len(cms))
	}
	d.noChanges(ctx, s, "after the raw-db restore")
}

// badInputs: each refused before anything changes.
func (d *drill) badInputs(ctx context.Context, s *stack.Stack, tg etcdbackup.Target, snap string) {
	d.refused(ctx, "a restore while quorum is healthy", tg, etcdbackup.RestoreOptions{From: snap}, "quorum", "3 of 3")

	data, _ := os.ReadFile(snap)
	dir := filepath.Join(d.lab.Work, "bad")
	os.MkdirAll(dir, 0o700)
	write := func(name string, b []byte, meta func(*etcdbackup.Metadata)) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		if meta != nil {
			m, _ := etcdbackup.ReadMetadata(snap)
			meta(m)
			j, _ := json.Marshal(m)
			os.WriteFile(etcdbackup.MetadataPath(p), j, 0o600)
		}
		return p
	}
	force := func(p string) etcdbackup.RestoreOptions { return etcdbackup.RestoreOptions{From: p, Force: true} }
	d.refused(ctx, "a truncated snapshot", tg, force(write("truncated.db", data[:len(data)/3], nil)), "not a usable etcd snapshot")
	d.refused(ctx, "a foreign file", tg, force(write("foreign.db", []byte("#!/bin/sh\necho not etcd\n"), nil)), "not a usable etcd snapshot")
	d.refused(ctx, "a snapshot changed since it was taken", tg, force(write("changed.db", data, func(m *etcdbackup.Metadata) { m.SHA256 = strings.Repeat("0", 64) })), "changed since")
	d.refused(ctx, "a snapshot of another etcd cluster", tg, force(write("other.db", data, func(m *etcdbackup.Metadata) { m.ClusterID = "123456789abcdef" })), "another cluster", "123456789abcdef")
	other, err := pki.New()
	if err != nil {
		d.t.Fatal(err)
	}
	d.refused(ctx, "another cluster's bundle", d.target(s, other), force(snap), "not the secrets bundle's CA")
	d.refused(ctx, "a snapshot of a cluster with other CAs", tg, force(write("otherca.db", data, func(m *etcdbackup.Metadata) { m.EtcdCA = "sha256:" + strings.Repeat("1", 64) })), "other CAs")
	d.refused(ctx, "no snapshot named", tg, etcdbackup.RestoreOptions{}, "--from")
	if _, err := etcdbackup.Restore(ctx, tg, etcdbackup.RestoreOptions{FromData: "gpu-1"}); err == nil || !strings.Contains(err.Error(), "not a control-plane node") {
		d.t.Errorf("--from-data a worker: %v", err)
	}
}

// doctorSnapshots: doctor shows each control-plane node's newest
// scheduled snapshot, younger than two intervals.
func (d *drill) doctorSnapshots(ctx context.Context, tg etcdbackup.Target) {
	d.t.Helper()
	rep, err := doctor.Run(ctx, doctor.Target{Inventory: tg.Inventory, Bundle: tg.Bundle, PrivateKey: tg.PrivateKey, KnownHosts: tg.KnownHosts, Dial: doctor.DialFunc(d.lab.Dial)})
	if err != nil {
		d.t.Fatal(err)
	}
	rows := 0
	for _, f := range rep.Findings {
		if f.Check != "etcd snapshot" {
			continue
		}
		rows++
		if f.Status != doctor.OK || !strings.Contains(f.Detail, "old") {
			d.t.Errorf("doctor on %s's snapshots: %s %s", f.Where, f.Status, f.Detail)
		}
	}
	if rows != 3 {
		d.t.Errorf("doctor shows %d etcd snapshot rows, want one per control-plane node", rows)
	}
}

func (d *drill) labMAC(node string) string {
	st, err := d.lab.LoadState()
	if err != nil {
		d.t.Fatal(err)
	}
	n, err := st.Node(node)
	if err != nil {
		d.t.Fatal(err)
	}
	return n.MAC
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
