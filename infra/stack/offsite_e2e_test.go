package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/statebackend"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// offsitePrefix is where the runtime test's cluster keeps its off-site
// snapshots in the lab's bucket, beside the Pulumi state.
const offsitePrefix = "runtime-test/etcd/"

// withOffsiteSnapshots schedules snapshots every 30 s, 2 kept, each copied
// to the lab's S3 bucket at endpoint (as the nodes reach it) with the
// keys of the lab's credentials file, in an inventory/lab.yaml variant.
func withOffsiteSnapshots(inv, endpoint, credentials string) string {
	return strings.Replace(inv, "\nssh:", "\n  etcd:\n    snapshots: {schedule: 30s, keep: 2, s3: {endpoint: \""+endpoint+"\", bucket: "+lab.S3Bucket+
		", prefix: "+offsitePrefix+", credentials: {file: \""+credentials+"\", profile: "+lab.S3Profile+"}}}\nssh:", 1)
}

// offsite is withOffsiteSnapshots for this test's lab.
func (e *e2e) offsite(inv string) string {
	e.t.Helper()
	st, err := e.lab.LoadState()
	if err != nil {
		e.t.Fatal(err)
	}
	return withOffsiteSnapshots(inv, lab.S3Endpoint(st), e.lab.S3CredentialsPath())
}

// checkOffsiteSnapshots: node's scheduled snapshots reach the bucket
// under PREFIX/NODE/ through the rclone up installed, each the bytes of
// the node's snapshot, checked against its .sha256, pruned to keep (2)
// after more runs than that; the keys are in a file only root reads on
// the node and in none of the Pulumi state's objects in the bucket.
func (e *e2e) checkOffsiteSnapshots(ctx context.Context, s *Stack, node string) {
	t := e.t
	t.Helper()
	endpoint, env := e.lab.S3(ctx)
	b, err := statebackend.ParseS3(lab.S3StateURL(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := b.Client(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		out := e.node(ctx, node, "journalctl -u "+etcdsnapshot.Service+" -o cat | grep -c '^copied to s3://' || true")
		n := 0
		for _, ch := range strings.TrimSpace(out) {
			n = n*10 + int(ch-'0')
		}
		return n
	}
	// More runs than the two kept, so the bucket must have been pruned.
	for deadline := time.Now().Add(2 * time.Minute); runs() < 3; time.Sleep(5 * time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("%s copied %d snapshots off-site in 2 minutes at one every 30 s:\n%s", node, runs(),
				e.node(ctx, node, "systemctl status --no-pager "+etcdsnapshot.Timer+" "+etcdsnapshot.Service+" | tail -n 20"))
		}
	}
	// Stop the timer while the bucket is read: a run between the listing
	// and the reads would prune what was listed.
	e.node(ctx, node, "systemctl stop "+etcdsnapshot.Timer+" && while systemctl is-active -q "+etcdsnapshot.Service+"; do sleep 0.2; done")
	defer e.node(ctx, node, "systemctl start "+etcdsnapshot.Timer)
	folder := offsitePrefix + node + "/"
	// Younger than two intervals (60 s) only just after a run.
	if f, ok := doctorRow(e.doctor(ctx, s.Inv, s.Bundle), "etcd off-site", node); !ok || f.Status != doctor.OK || !strings.Contains(f.Detail, folder) || !strings.Contains(f.Detail, "2 kept of 2") {
		t.Errorf("doctor's off-site row for %s: %+v (found %v)", node, f, ok)
	}
	var dbs []string
	for o := range c.ListObjects(ctx, lab.S3Bucket, minio.ListObjectsOptions{Prefix: folder, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if strings.HasSuffix(o.Key, ".db") {
			dbs = append(dbs, o.Key)
		}
	}
	if len(dbs) != 2 {
		t.Errorf("%s's snapshots in the bucket after %d runs: %v, want the newest 2", node, runs(), dbs)
	}
	get := func(key string) []byte {
		r, err := c.GetObject(ctx, lab.S3Bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("reading s3://%s/%s: %v", lab.S3Bucket, key, err)
		}
		return data
	}
	for _, key := range dbs {
		sum := sha256.Sum256(get(key))
		line := strings.Fields(string(get(key + ".sha256")))
		if len(line) != 2 || line[0] != hex.EncodeToString(sum[:]) || line[1] != path.Base(key) {
			t.Errorf("s3://%s/%s does not match its .sha256 %q", lab.S3Bucket, key, line)
		}
		local := strings.Fields(e.node(ctx, node, "sha256sum "+etcdsnapshot.Dir+"/"+path.Base(key)+" 2>/dev/null || true"))
		if len(local) > 0 && local[0] != hex.EncodeToString(sum[:]) {
			t.Errorf("s3://%s/%s is not %s's own snapshot", lab.S3Bucket, key, node)
		}
	}
	if mode := strings.TrimSpace(e.node(ctx, node, "stat -c %a:%U "+etcdsnapshot.RcloneConfigPath)); mode != "600:root" {
		t.Errorf("%s's %s is %s, want 600:root", node, etcdsnapshot.RcloneConfigPath, mode)
	}
	// With the timer still stopped, so the newest copy is the one made.
	e.checkSnapshotToOffsite(ctx, s)
	secret := env["AWS_SECRET_ACCESS_KEY"]
	for o := range c.ListObjects(ctx, lab.S3Bucket, minio.ListObjectsOptions{Prefix: "state/", Recursive: true}) {
		if o.Err == nil && strings.Contains(string(get(o.Key)), secret) {
			t.Errorf("the Pulumi state's s3://%s/%s holds the bucket's secret key in plain", lab.S3Bucket, o.Key)
		}
	}
}

// checkSnapshotToOffsite is `homelab etcd snapshot --to s3` on s's
// cluster: the node's own scheduled snapshot run now, its copy named by
// the run, downloaded back from the bucket to this machine over the lab's
// network and checked as any snapshot (etcd's hash, bbolt, the cluster's
// CA in its data) against the .sha256 its node wrote; then the newest
// copy (--latest) is that one.
func (e *e2e) checkSnapshotToOffsite(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	target := e.etcdTarget(s)
	start := time.Now()
	o, err := etcdbackup.SnapshotOffsite(ctx, target, "", t.TempDir())
	if err != nil {
		t.Fatalf("snapshot --to s3: %v", err)
	}
	meta := o.Meta
	if o.Node != "solo" || !strings.HasPrefix(o.URL, "s3://"+lab.S3Bucket+"/"+offsitePrefix+"solo/snapshot-") || meta.Revision == 0 || meta.TotalKeys == 0 || meta.ClusterID == "" {
		t.Fatalf("snapshot --to s3: %+v, %+v", *o, *meta)
	}
	t.Logf("figures: snapshot --to s3 and the copy downloaded back and checked: %s (%d bytes, %d keys)", time.Since(start).Round(time.Millisecond), meta.Size, meta.TotalKeys)
	name := path.Base(o.URL)
	if sum := strings.Fields(e.node(ctx, "solo", "sha256sum "+etcdsnapshot.Dir+"/"+name)); len(sum) == 0 || sum[0] != meta.SHA256 {
		t.Errorf("%s is not solo's own %s: %s against %v", o.Path, name, meta.SHA256, sum)
	}
	if _, latest, _, err := etcdbackup.FetchOffsite(ctx, target, "", t.TempDir()); err != nil || latest.URL(lab.S3Bucket) != o.URL {
		t.Errorf("the newest off-site copy is %s (%v), want the one just made, %s", latest.Key, err, o.URL)
	}
}

// offsiteNodes: three control-plane nodes and a worker, all real.
const offsiteNodes = `nodes:
  - {name: cp-1, role: control-plane, address: 10.77.0.120, interface: eth0}
  - {name: cp-2, role: control-plane, address: 10.77.0.121, interface: eth0}
  - {name: cp-3, role: control-plane, address: 10.77.0.122, interface: eth0}
  - {name: w1, role: worker, address: 10.77.0.130, interface: eth0}
`

// TestRestoreFromOffsiteInTheLab is issue 35's disaster: every
// control-plane disk lost, and the nodes' own snapshots with them; the
// off-site bucket is what is left. Real nodes copy their snapshots to the
// lab's S3 server; 30 ConfigMaps are written, a copy made with snapshot
// --to s3, 5 more written; all three control-plane machines get new
// disks. One restore from the newest copy seeds the bootstrap node, and
// one up sets the control plane up over that data and joins the others:
// the 30 are back without the 5, three healthy members, every Node
// Ready, the worker never rebuilt, and the next up a no-op.
func TestRestoreFromOffsiteInTheLab(t *testing.T) {
	labtest.Long(t, "three control-plane machines replaced and the cluster back from the bucket hold the lab about 12 minutes")
	needE2E(t)
	e := newE2EWith(t, func(s string) string { return withNodes(s, offsiteNodes, "cp-1") }, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	inv := e.inventory("offsite", e.offsite)
	s := e.open(ctx, inv)
	e.up(ctx, s)
	e.verify(ctx, s)
	e.node(ctx, "cp-1", labKubectl+"create namespace offsite >/dev/null && for i in $(seq 1 30); do "+labKubectl+"-n offsite create configmap before-$i --from-literal=i=$i >/dev/null; done")
	// The scheduled copies stop: the one made now is the newest.
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		e.node(ctx, n, "systemctl stop "+etcdsnapshot.Timer)
	}
	tg := e.etcdTarget(s)
	o, err := etcdbackup.SnapshotOffsite(ctx, tg, "", t.TempDir())
	if err != nil {
		t.Fatalf("snapshot --to s3: %v", err)
	}
	e.node(ctx, "cp-1", "for i in $(seq 1 5); do "+labKubectl+"-n offsite create configmap after-$i --from-literal=i=$i >/dev/null; done")
	w1 := strings.TrimSpace(e.node(ctx, "w1", "systemctl show -p ActiveEnterTimestampMonotonic --value kubelet"))

	lost := time.Now()
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if err := e.lab.PowerOff(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if err := e.lab.Replace(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := e.lab.AcceptHostKey(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	s = e.open(ctx, inv)
	tg = e.etcdTarget(s)
	path, c, _, err := etcdbackup.FetchOffsite(ctx, tg, "", t.TempDir())
	if err != nil || c.URL(lab.S3Bucket) != o.URL {
		t.Fatalf("restore --latest fetched %s (%v), want the copy snapshot --to s3 made, %s", c.Key, err, o.URL)
	}
	rep, err := etcdbackup.Restore(ctx, tg, etcdbackup.RestoreOptions{From: path})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !rep.Seeded || rep.Node != "cp-1" || strings.Join(rep.Rejoin, ",") != "cp-2,cp-3" || rep.Revision != o.Meta.Revision {
		t.Errorf("restore report: %+v", *rep)
	}
	e.up(ctx, s)
	e.verify(ctx, s)
	t.Logf("figures: every control-plane disk lost to verify passing, from the off-site copy: %s (restore %s)", time.Since(lost).Round(time.Second), rep.Took.Round(time.Millisecond))
	got := e.node(ctx, "cp-1", labKubectl+"-n offsite get configmaps -o name | grep -c before- ; "+labKubectl+"-n offsite get configmaps -o name | grep -c after- || true")
	if f := strings.Fields(got); len(f) != 2 || f[0] != "30" || f[1] != "0" {
		t.Errorf("ConfigMaps after the restore (before-, after-): %q, want the copy's 30 and none of the 5 after it", got)
	}
	if members := e.node(ctx, "cp-1", "etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/apiserver-etcd-client.crt --key=/etc/kubernetes/pki/apiserver-etcd-client.key member list 2>/dev/null | wc -l"); strings.TrimSpace(members) != "3" {
		t.Errorf("etcd members after the restore and up: %q, want 3", members)
	}
	if now := strings.TrimSpace(e.node(ctx, "w1", "systemctl show -p ActiveEnterTimestampMonotonic --value kubelet")); now != w1 {
		t.Errorf("w1's kubelet restarted (%s, was %s): the worker was rebuilt, not kept", now, w1)
	}
	e.checkNoOp(ctx, s, "after the restore")
}

// etcdTarget is how homelab etcd reaches s's cluster in this lab.
func (e *e2e) etcdTarget(s *Stack) etcdbackup.Target {
	e.t.Helper()
	key, err := readFile(e.lab.KeyPath())
	if err != nil {
		e.t.Fatal(err)
	}
	return etcdbackup.Target{Inventory: s.Inv, Bundle: s.Bundle, PrivateKey: key, KnownHosts: e.lab.KnownHostsPath(), Dial: e.lab.Dial,
		History: filepath.Join(e.stateDir, s.Inv.Cluster.Name, etcdbackup.HistoryFile)}
}
