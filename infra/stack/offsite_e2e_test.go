package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/lab"
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
	key, err := readFile(e.lab.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	target := etcdbackup.Target{Inventory: s.Inv, Bundle: s.Bundle, PrivateKey: key, KnownHosts: e.lab.KnownHostsPath(), Dial: e.lab.Dial,
		History: filepath.Join(t.TempDir(), etcdbackup.HistoryFile)}
	start := time.Now()
	url, node, err := etcdbackup.SnapshotOffsite(ctx, target, "")
	if err != nil || node != "solo" || !strings.HasPrefix(url, "s3://"+lab.S3Bucket+"/"+offsitePrefix+"solo/snapshot-") {
		t.Fatalf("snapshot --to s3: %q from %q, %v", url, node, err)
	}
	path, c, meta, err := etcdbackup.FetchOffsite(ctx, target, url, t.TempDir())
	if err != nil || meta.Revision == 0 || meta.TotalKeys == 0 || meta.ClusterID == "" || c.Node != "solo" {
		t.Fatalf("the copy %s downloaded back: %+v %v", url, meta, err)
	}
	t.Logf("figures: snapshot --to s3 and the copy downloaded back and checked: %s (%d bytes, %d keys)", time.Since(start).Round(time.Millisecond), meta.Size, meta.TotalKeys)
	if sum := strings.Fields(e.node(ctx, "solo", "sha256sum "+etcdsnapshot.Dir+"/"+c.Name)); len(sum) == 0 || sum[0] != meta.SHA256 {
		t.Errorf("%s is not solo's own %s: %s against %v", path, c.Name, meta.SHA256, sum)
	}
	if _, latest, _, err := etcdbackup.FetchOffsite(ctx, target, "", t.TempDir()); err != nil || latest.Key != c.Key {
		t.Errorf("the newest off-site copy is %s (%v), want the one just made, %s", latest.Key, err, c.Key)
	}
}
