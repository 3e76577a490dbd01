package offsite

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
	"github.com/homelab-dev/homelab/inventory"
)

const id, secret = "homelab-test", "homelab-test-secret"

func bucketAt(endpoint string) *inventory.SnapshotsS3 {
	return &inventory.SnapshotsS3{Endpoint: endpoint, Bucket: "backups", Prefix: "lab/etcd/", Region: "us-east-1",
		Credentials: inventory.S3Credentials{File: "/lab/credentials", Profile: "lab"}}
}

// The bucket as the nodes' rclone leaves it, read from this machine with
// the same keys: every node's copies, newest first, nothing else; one
// downloaded with the files beside it.
func TestListAndDownload(t *testing.T) {
	endpoint := s3test.Server(t, id, secret, "backups")
	c := s3test.Client(t, endpoint, id, secret)
	ctx := context.Background()
	for k, v := range map[string]string{
		"lab/etcd/cp-1/snapshot-20261201T000000Z.db":        "old",
		"lab/etcd/cp-2/snapshot-20261203T000000Z.db":        "newest",
		"lab/etcd/cp-2/snapshot-20261203T000000Z.db.sha256": "abc  snapshot-20261203T000000Z.db\n",
		"lab/etcd/cp-2/snapshot-20261203T000000Z.etcd.json": `{"status":[]}`,
		"lab/etcd/cp-3/snapshot-20261202T000000Z.db":        "middle",
		"lab/etcd/cp-3/notes.txt":                           "not a snapshot",
		"other/etcd/cp-1/snapshot-20991231T000000Z.db":      "another cluster's",
	} {
		if _, err := c.PutObject(ctx, "backups", k, strings.NewReader(v), int64(len(v)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(bucketAt(endpoint), inventory.S3Keys{AccessKeyID: id, SecretAccessKey: secret}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range all {
		got = append(got, c.Node+"/"+c.Name)
	}
	if strings.Join(got, " ") != "cp-2/snapshot-20261203T000000Z.db cp-3/snapshot-20261202T000000Z.db cp-1/snapshot-20261201T000000Z.db" {
		t.Errorf("listed %v", got)
	}
	d, err := b.Download(ctx, all[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(d.Path); string(data) != "newest" || !strings.HasPrefix(string(d.Sum), "abc ") || string(d.EtcdState) != `{"status":[]}` {
		t.Errorf("downloaded %q, sum %q, state %q", data, d.Sum, d.EtcdState)
	}
	d, err = b.Download(ctx, all[2], t.TempDir())
	if err != nil || d.Sum != nil || d.EtcdState != nil {
		t.Errorf("a copy without its sidecars: %+v %v", d, err)
	}
	if c, err := b.ParseURL("s3://backups/lab/etcd/cp-3/snapshot-20261202T000000Z.db"); err != nil || c.Node != "cp-3" || c.TakenAt.Day() != 2 {
		t.Errorf("%+v %v", c, err)
	}
	for _, bad := range []string{"s3://elsewhere/lab/etcd/cp-3/snapshot-20261202T000000Z.db", "s3://backups/lab/etcd/cp-3/notes.txt",
		"s3://backups/other/etcd/cp-1/snapshot-20991231T000000Z.db", "/tmp/x.db"} {
		if _, err := b.ParseURL(bad); err == nil || !strings.Contains(err.Error(), "--latest") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// What a user gets wrong is named with the field to fix, and no secret.
func TestRefusals(t *testing.T) {
	endpoint := s3test.Server(t, id, secret, "backups")
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		s3       *inventory.SnapshotsS3
		keys     inventory.S3Keys
		field    string
		mentions string
	}{
		{"refused keys", bucketAt(endpoint), inventory.S3Keys{AccessKeyID: id, SecretAccessKey: "not-the-secret"}, "credentials", "/lab/credentials [lab]"},
		{"unknown key", bucketAt(endpoint), inventory.S3Keys{AccessKeyID: "nobody", SecretAccessKey: "not-the-secret"}, "credentials", "refused"},
		{"missing bucket", func() *inventory.SnapshotsS3 { s := bucketAt(endpoint); s.Bucket = "nope"; return s }(), inventory.S3Keys{AccessKeyID: id, SecretAccessKey: secret}, "bucket", "does not exist"},
		{"no server", bucketAt("http://127.0.0.1:1"), inventory.S3Keys{AccessKeyID: id, SecretAccessKey: secret}, "endpoint", "cannot reach"},
	} {
		b, err := Open(c.s3, c.keys, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.List(ctx)
		if err == nil || !strings.Contains(err.Error(), "cluster.etcd.snapshots.s3."+c.field) || !strings.Contains(err.Error(), c.mentions) || strings.Contains(err.Error(), "not-the-secret") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
