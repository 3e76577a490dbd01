package doctor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

func offsiteInventory(endpoint string) *inventory.Snapshots {
	return &inventory.Snapshots{Schedule: "1h", Keep: 3, S3: &inventory.SnapshotsS3{Endpoint: endpoint, Bucket: "backups", Prefix: "lab/etcd/", Region: "us-east-1", CAFile: "/ca.pem"}}
}

func TestOffsiteScriptGolden(t *testing.T) {
	scriptstest.Golden(t, offsiteScript(offsiteInventory("https://nas.lan:9000").S3, "cp-1"), "")
}

// doctor's listing of a node's folder in the bucket, from the real sh and
// Debian's rclone against a real S3 server: the node's snapshots only (a
// peer's and a foreign file are not its), the newest one's age from its
// name; refused keys and a node without rclone read as such.
func TestOffsiteScriptInARealShell(t *testing.T) {
	const id, secret = "homelab-test", "homelab-test-secret"
	endpoint := s3test.Server(t, id, secret, "backups")
	bin := t.TempDir()
	os.Symlink(s3test.Rclone(t), filepath.Join(bin, "rclone"))
	c := s3test.Client(t, endpoint, id, secret)
	newest := "snapshot-" + time.Now().UTC().Add(-2*time.Hour).Format(etcdsnapshot.TimeFormat) + ".db"
	for _, k := range []string{"lab/etcd/cp-1/snapshot-20261201T000000Z.db", "lab/etcd/cp-1/" + newest, "lab/etcd/cp-1/" + newest + ".sha256",
		"lab/etcd/cp-1/notes.txt", "lab/etcd/cp-2/snapshot-20991231T000000Z.db"} {
		if _, err := c.PutObject(context.Background(), "backups", k, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sn := offsiteInventory(endpoint)
	conf := filepath.Join(t.TempDir(), "rclone.conf")
	run := func(secret, path string) *offsiteFacts {
		files, err := etcdsnapshot.OffsiteFiles(sn, inventory.S3Keys{AccessKeyID: id, SecretAccessKey: secret}, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(conf, files[0].Content, 0o600)
		a := offsiteArgs{Config: conf, Remote: etcdsnapshot.RemotePath(sn.S3, "cp-1"), Pattern: etcdsnapshot.NamePattern}
		cmd := exec.Command("sh", "-c", scripts.Render("doctor/offsite", a).String())
		cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return parseOffsite(string(out))
	}
	o := run(secret, bin+":/usr/bin:/bin")
	if !o.read || o.count != 2 || o.newest != newest || o.age < 119*time.Minute || o.age > 121*time.Minute || o.err != "" {
		t.Errorf("read %+v", *o)
	}
	if o := run("not-the-secret", bin+":/usr/bin:/bin"); o.err == "" || o.count != 0 || strings.Contains(o.err, "not-the-secret") {
		t.Errorf("refused keys read as %+v", *o)
	}
	if o := run(secret, "/usr/bin:/bin"); o.missing != "rclone" {
		t.Errorf("a node without rclone read as %+v", *o)
	}
}

func TestJudgeOffsite(t *testing.T) {
	sn := offsiteInventory("https://nas.lan")
	for _, c := range []struct {
		facts offsiteFacts
		want  Status
		says  string
	}{
		{offsiteFacts{read: true, count: 2, newest: "snapshot-20261201T000000Z.db", age: 90 * time.Minute}, OK, "2 kept of 3"},
		{offsiteFacts{read: true, count: 2, newest: "snapshot-20261201T000000Z.db", age: 3 * time.Hour}, Warn, "more than two intervals"},
		{offsiteFacts{read: true}, Warn, "no snapshot copied"},
		{offsiteFacts{read: true, err: "Forbidden: Forbidden"}, Warn, "Forbidden"},
		{offsiteFacts{read: true, missing: "rclone"}, Warn, "lacks rclone"},
		{offsiteFacts{}, Warn, "could not list"},
	} {
		st, detail := judgeOffsite(sn, time.Hour, "s3://backups/lab/etcd/cp-1/", &c.facts)
		if st != c.want || !strings.Contains(detail, c.says) {
			t.Errorf("%+v: %v %q, want %v saying %q", c.facts, st, detail, c.want, c.says)
		}
	}
}
