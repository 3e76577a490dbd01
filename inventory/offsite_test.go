package inventory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func withS3(t *testing.T, s3 map[string]any) []byte {
	m := baseDoc(t)
	at(m, "cluster")["etcd"] = map[string]any{"snapshots": map[string]any{"s3": s3}}
	return marshal(t, m)
}

func TestSnapshotsS3Defaults(t *testing.T) {
	inv, warnings, err := Parse(withS3(t, map[string]any{"endpoint": "https://nas.lan:9000", "bucket": "backups", "credentials": map[string]any{"file": "/k"}}))
	if err != nil || len(warnings) != 0 {
		t.Fatal(err, warnings)
	}
	s3 := inv.Cluster.Etcd.SnapshotsS3()
	if s3.Region != DefaultS3Region || s3.Credentials.Profile != DefaultS3Profile || s3.Rclone != DefaultRclone || s3.Prefix != inv.Cluster.Name+"/etcd/" {
		t.Errorf("defaults: %+v", *s3)
	}
	inv, _, err = Parse(withS3(t, map[string]any{"endpoint": "https://nas.lan:9000", "bucket": "backups", "prefix": "lab/etcd", "credentials": map[string]any{"file": "/k"}}))
	if err != nil || inv.Cluster.Etcd.SnapshotsS3().Prefix != "lab/etcd/" {
		t.Errorf("a prefix without its slash: %v %v", inv.Cluster.Etcd.SnapshotsS3(), err)
	}
}

// Every bad field is named at once; plain http is allowed with a warning
// naming what crosses the network.
func TestSnapshotsS3Problems(t *testing.T) {
	_, _, err := Parse(withS3(t, map[string]any{"endpoint": "https://user:pw@nas.lan:9000/x", "bucket": "Backups_1", "prefix": "/../x", "region": "eu west", "rclone": "latest"}))
	want := []string{"cluster.etcd.snapshots.s3.bucket", "cluster.etcd.snapshots.s3.credentials.file", "cluster.etcd.snapshots.s3.endpoint",
		"cluster.etcd.snapshots.s3.prefix", "cluster.etcd.snapshots.s3.rclone", "cluster.etcd.snapshots.s3.region"}
	if got := paths(Problems(err)); !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	for _, bad := range []string{"a/./b", "a//b", "a b", "x/..", "$(reboot)"} {
		_, _, err := Parse(withS3(t, map[string]any{"endpoint": "https://nas.lan", "bucket": "backups", "prefix": bad, "credentials": map[string]any{"file": "/k"}}))
		if !slices.Equal(paths(Problems(err)), []string{"cluster.etcd.snapshots.s3.prefix"}) {
			t.Errorf("prefix %q: %v", bad, err)
		}
	}
	_, warnings, err := Parse(withS3(t, map[string]any{"endpoint": "http://10.0.0.2:9000", "bucket": "backups", "credentials": map[string]any{"file": "/k"}}))
	if err != nil || len(warnings) != 1 || warnings[0].Path != "cluster.etcd.snapshots.s3.endpoint" || !strings.Contains(warnings[0].Error(), "unencrypted") {
		t.Errorf("plain http: %v %v", warnings, err)
	}
}

func TestReadS3Credentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(file, []byte("[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n[empty]\nregion = x\n"), 0o600)
	s3 := SnapshotsS3{Credentials: S3Credentials{File: file, Profile: "default"}}
	if k, err := s3.ReadS3Credentials(); err != nil || k.AccessKeyID != "AKID" || k.SecretAccessKey != "SECRET" {
		t.Errorf("%+v %v", k, err)
	}
	s3.Credentials.Profile = "empty"
	if _, err := s3.ReadS3Credentials(); err == nil || !strings.Contains(err.Error(), S3CredentialsField) || !strings.Contains(err.Error(), "[empty]") {
		t.Errorf("a profile without keys: %v", err)
	}
	os.WriteFile(file, []byte("[default]\naws_access_key_id = AKID\naws_secret_access_key = \"\"\"SECRET\nenv_auth = true\"\"\"\n"), 0o600)
	s3.Credentials.Profile = "default"
	if k, err := s3.ReadS3Credentials(); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a key with a newline: %+v %v", k, err)
	}
	s3.Credentials.Profile = "none"
	if _, err := s3.ReadS3Credentials(); err == nil || !strings.Contains(err.Error(), S3CredentialsField) {
		t.Errorf("a missing profile: %v", err)
	}
}

func TestReadS3CA(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(file, []byte("not a certificate"), 0o600)
	if _, err := (SnapshotsS3{CAFile: file}).ReadS3CA(); err == nil || !strings.Contains(err.Error(), "caFile") {
		t.Errorf("%v", err)
	}
	if ca, err := (SnapshotsS3{}).ReadS3CA(); ca != nil || err != nil {
		t.Errorf("no caFile: %v %v", ca, err)
	}
}
