package etcdsnapshot

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
	"github.com/homelab-dev/homelab/inventory"
)

func offsite(endpoint string) *inventory.Snapshots {
	return &inventory.Snapshots{Schedule: "1h", Keep: 2, S3: &inventory.SnapshotsS3{
		Endpoint: endpoint, Bucket: "backups", Prefix: "lab/etcd/", Region: "us-east-1"}}
}

// The secret key is only in the configuration, which is a secret file
// only root reads.
func TestOffsiteFiles(t *testing.T) {
	sn := offsite("https://nas.lan:9000")
	sn.S3.CAFile = "/ca.pem"
	files, err := OffsiteFiles(sn, inventory.S3Keys{AccessKeyID: "AKID", SecretAccessKey: "s3cr3t-value"}, []byte("PEM"))
	if err != nil || len(files) != 2 {
		t.Fatal(files, err)
	}
	conf := files[0]
	if conf.Path != RcloneConfigPath || conf.Mode != 0o600 || !conf.Secret || !strings.Contains(string(conf.Content), "secret_access_key = s3cr3t-value\n") ||
		!strings.Contains(string(conf.Content), "endpoint = https://nas.lan:9000\n") {
		t.Errorf("rclone's configuration: %+v\n%s", conf, conf.Content)
	}
	if files[1].Path != CAPath || string(files[1].Content) != "PEM" {
		t.Errorf("the CA: %+v", files[1])
	}
	script, err := Files(sn, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(script[0].Content); strings.Contains(s, "s3cr3t-value") || !strings.Contains(s, "--ca-cert "+CAPath) || !strings.Contains(s, "offsite:backups/lab/etcd/cp-1") {
		t.Errorf("the script:\n%s", s)
	}
	if files, err := OffsiteFiles(&inventory.Snapshots{Schedule: "1h", Keep: 2}, inventory.S3Keys{}, nil); files != nil || err != nil {
		t.Errorf("no s3 section: %v %v", files, err)
	}
}

// The script with the real rclone against a real S3 server (versitygw),
// etcdctl and date stand-ins as in TestScriptKeepsTheNewest: each snapshot
// is copied under the node's folder and the newest Keep kept there; the
// copies are the node's bytes. Refused keys or a server that does not
// answer fail the run, and the snapshot is still saved on the node.
func TestScriptCopiesOffsite(t *testing.T) {
	const id, secret = "homelab-test", "homelab-test-secret"
	endpoint := s3test.Server(t, id, secret, "backups")
	rclone := s3test.Rclone(t)
	sn := offsite(endpoint)
	files, err := Files(sn, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	dir, bin, etc := t.TempDir(), t.TempDir(), t.TempDir()
	conf := filepath.Join(etc, "rclone.conf")
	writeConf := func(secret string) {
		f, err := OffsiteFiles(sn, inventory.S3Keys{AccessKeyID: id, SecretAccessKey: secret}, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(conf, f[0].Content, 0o600)
	}
	writeConf(secret)
	script := filepath.Join(bin, "snapshot")
	s := strings.ReplaceAll(string(files[0].Content), Dir, dir)
	os.WriteFile(script, []byte(strings.ReplaceAll(s, RcloneConfigPath, conf)), 0o755)
	os.Symlink(rclone, filepath.Join(bin, "rclone"))
	os.WriteFile(filepath.Join(bin, "etcdctl"), []byte(`#!/bin/sh
for a; do last=$a; done
case "$*" in *"snapshot save"*) head -c 100000 /dev/urandom > "$last";; *"endpoint status"*) echo '[{"Status":{"header":{"cluster_id":1}}}]';; *) echo '{}';; esac
`), 0o755)
	os.WriteFile(filepath.Join(bin, "date"), []byte(`#!/bin/sh
n=$(cat "$COUNTER" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNTER"; printf '2026120%dT000000Z\n' "$n"
`), 0o755)
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "COUNTER="+filepath.Join(t.TempDir(), "n"), "HOME="+t.TempDir())
	run := func() (string, error) {
		cmd := exec.Command(script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for i := 0; i < 3; i++ {
		if out, err := run(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
	}
	c := s3test.Client(t, endpoint, id, secret)
	ctx := context.Background()
	var keys []string
	for o := range c.ListObjects(ctx, "backups", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	var want []string
	for _, n := range []string{"snapshot-20261202T000000Z", "snapshot-20261203T000000Z"} {
		want = append(want, "lab/etcd/cp-1/"+n+".db", "lab/etcd/cp-1/"+n+".db.sha256", "lab/etcd/cp-1/"+n+".etcd.json")
	}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("in the bucket:\n%v\nwant\n%v", keys, want)
	}
	for _, n := range []string{"snapshot-20261203T000000Z.db", "snapshot-20261203T000000Z.db.sha256"} {
		local, _ := os.ReadFile(filepath.Join(dir, n))
		obj, err := c.GetObject(ctx, "backups", "lab/etcd/cp-1/"+n, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		remote, _ := io.ReadAll(obj)
		if sha256.Sum256(local) != sha256.Sum256(remote) || len(local) == 0 {
			t.Errorf("%s: %d bytes in the bucket, %d on the node, not the same", n, len(remote), len(local))
		}
	}

	writeConf("not-the-secret")
	out, err := run()
	if err == nil {
		t.Errorf("the run succeeded with refused keys:\n%s", out)
	}
	if strings.Contains(out, "not-the-secret") {
		t.Errorf("the run printed the secret key:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshot-20261204T000000Z.db")); err != nil {
		t.Errorf("a refused upload lost the node's snapshot: %v\n%s", err, out)
	}
}
