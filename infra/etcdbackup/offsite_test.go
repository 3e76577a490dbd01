package etcdbackup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// A real etcd's snapshot, in the bucket as a node's rclone leaves it (the
// .db, its .sha256 line, etcdctl's status beside it): FetchOffsite
// downloads the newest, checks it and writes its metadata, the cluster ID
// read from the status. A copy damaged in the bucket is refused and not
// left on this machine.
func TestFetchOffsite(t *testing.T) {
	etcd := toolstest.Require(t, "etcd")
	const id, secret = "homelab-test", "homelab-test-secret"
	endpoint := s3test.Server(t, id, secret, "backups")
	work := t.TempDir()
	m := startEtcd(t, etcd, filepath.Join(work, "data"), "etcd-cluster", nil)
	cli := m.client_(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 20; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/test/cm-%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(work, "snap.db")
	saved, err := Save(ctx, cli, snap, Metadata{Cluster: "homelab", Node: "cp-1"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(snap)
	damaged := append([]byte{}, data...)
	damaged[len(damaged)/2] ^= 0xff
	c := s3test.Client(t, endpoint, id, secret)
	put := func(key string, v []byte) {
		if _, err := c.PutObject(ctx, "backups", key, strings.NewReader(string(v)), int64(len(v)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status := fmt.Sprintf(`{"status":[{"Status":{"header":{"cluster_id":%d,"member_id":7}}}],"members":null}`, mustParseHex(t, saved.ClusterID))
	for name, db := range map[string][]byte{"snapshot-20261201T000000Z": data, "snapshot-20261202T000000Z": damaged} {
		put("lab/etcd/cp-2/"+name+".db", db)
		put("lab/etcd/cp-2/"+name+".db.sha256", []byte(saved.SHA256+"  "+name+".db\n"))
		put("lab/etcd/cp-2/"+name+".etcd.json", []byte(status))
	}
	creds := filepath.Join(work, "credentials")
	os.WriteFile(creds, []byte("[lab]\naws_access_key_id = "+id+"\naws_secret_access_key = "+secret+"\n"), 0o600)
	b, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{Bundle: b, Inventory: &inventory.Inventory{Cluster: inventory.Cluster{Name: "homelab", Etcd: inventory.Etcd{Snapshots: &inventory.Snapshots{
		Schedule: "1h", Keep: 2, S3: &inventory.SnapshotsS3{Endpoint: endpoint, Bucket: "backups", Prefix: "lab/etcd/", Region: "us-east-1",
			Credentials: inventory.S3Credentials{File: creds, Profile: "lab"}}}}}}}

	dir := t.TempDir()
	if _, _, _, err := FetchOffsite(ctx, tg, "", dir); err == nil || !strings.Contains(err.Error(), "snapshot-20261202T000000Z.db") {
		t.Errorf("the newest copy, damaged in the bucket: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused copy left files: %v", left)
	}
	path, cp, meta, err := FetchOffsite(ctx, tg, "s3://backups/lab/etcd/cp-2/snapshot-20261201T000000Z.db", dir)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Node != "cp-2" || meta.Node != "cp-2" || meta.SHA256 != saved.SHA256 || meta.Revision != saved.Revision || meta.ClusterID != saved.ClusterID ||
		!meta.TakenAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("fetched %s: %+v", path, meta)
	}
	if read, err := ReadMetadata(path); err != nil || read.SHA256 != saved.SHA256 {
		t.Errorf("its metadata beside it: %+v %v", read, err)
	}
}

func mustParseHex(t *testing.T, s string) uint64 {
	var v uint64
	if _, err := fmt.Sscanf(s, "%x", &v); err != nil {
		t.Fatal(err)
	}
	return v
}
