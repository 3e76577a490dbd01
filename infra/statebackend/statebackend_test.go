package statebackend

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

func TestParseS3(t *testing.T) {
	for _, tc := range []struct {
		url                                     string
		bucket, prefix, endpoint, region, fault string
		secure                                  bool
	}{
		{url: "s3://state?endpoint=http://10.77.0.1:9000&s3ForcePathStyle=true&region=us-east-1", bucket: "state", endpoint: "10.77.0.1:9000", region: "us-east-1"},
		{url: "s3://state/homelab?endpoint=https://nas.lan:9000&region=garage", bucket: "state", prefix: "homelab", endpoint: "nas.lan:9000", region: "garage", secure: true},
		{url: "s3://state?endpoint=nas.lan:9000&disableSSL=true", bucket: "state", endpoint: "nas.lan:9000"},
		{url: "s3://state?endpoint=nas.lan:9000", bucket: "state", endpoint: "nas.lan:9000", secure: true},
		{url: "s3://state?region=eu-west-1", bucket: "state", region: "eu-west-1", secure: true},
		{url: "s3://?endpoint=http://nas:9000", fault: "names no bucket"},
		{url: "s3://state?endpoint=ftp://nas:9000", fault: "endpoint=ftp://nas:9000"},
		{url: "s3://state?endpoint=http://nas:9000&disable_https=maybe", fault: "disable_https=maybe"},
	} {
		b, err := ParseS3(tc.url)
		if tc.fault != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fault) {
				t.Errorf("%s: error %v, want one naming %q", tc.url, err, tc.fault)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if b.Bucket != tc.bucket || b.Prefix != tc.prefix || b.Endpoint != tc.endpoint || b.Region != tc.region || b.Secure != tc.secure {
			t.Errorf("%s: parsed %+v", tc.url, *b)
		}
	}
	if b, err := ParseS3("s3://u:hunter2@state?endpoint=http://nas:9000"); err != nil || strings.Contains(b.URL, "hunter2") {
		t.Errorf("a password in the URL is shown: %v %v", b, err)
	}
}

func envOf(m map[string]string) Env { return func(k string) string { return m[k] } }

func TestCheckAgainstARealServer(t *testing.T) {
	ctx := t.Context()
	endpoint := s3test.Server(t, "operator", "operator-secret-1")
	good := map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1"}
	b, err := ParseS3("s3://state?endpoint=" + endpoint + "&s3ForcePathStyle=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := b.Client(envOf(good), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(ctx, envOf(good), nil); err == nil || !strings.Contains(err.Error(), `bucket "state" does not exist`) {
		t.Errorf("a missing bucket: %v", err)
	}
	if err := c.MakeBucket(ctx, "state", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(ctx, envOf(good), nil); err != nil {
		t.Errorf("the bucket with good keys: %v", err)
	}

	creds := filepath.Join(t.TempDir(), "credentials")
	config := filepath.Join(t.TempDir(), "config")
	os.WriteFile(config, []byte("[profile lab]\nregion = us-east-1\n"), 0o600)
	os.WriteFile(creds, []byte("[lab]\naws_access_key_id = operator\naws_secret_access_key = operator-secret-1\n"), 0o600)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		url   string
		fault string // "" passes
	}{
		{"a profile of the shared credentials file", map[string]string{"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "lab"}, "", ""},
		{"the URL's profile wins over AWS_PROFILE", map[string]string{"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "nope"}, "&profile=lab", ""},
		{"a wrong secret", map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "wrong"}, "", "refused the credentials from AWS_ACCESS_KEY_ID"},
		{"an unknown key", map[string]string{"AWS_ACCESS_KEY_ID": "stranger", "AWS_SECRET_ACCESS_KEY": "operator-secret-1"}, "", "refused the credentials"},
		{"half the keys", map[string]string{"AWS_ACCESS_KEY_ID": "operator"}, "", "set both"},
		{"no credentials at all", map[string]string{"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}, "", "no credentials"},
		{"a profile the file lacks", map[string]string{"AWS_SHARED_CREDENTIALS_FILE": creds}, "&profile=other", "profile other of"},
		{"no region", map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1", "AWS_CONFIG_FILE": "/nonexistent"}, "&region=", "add region="},
		{"the region of the profile's config", map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1", "AWS_CONFIG_FILE": config, "AWS_PROFILE": "lab"}, "&region=", ""},
		{"the region from AWS_REGION", map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1", "AWS_REGION": "us-east-1"}, "&region=", ""},
	} {
		region := "&region=us-east-1"
		if strings.Contains(tc.url, "region=") {
			region = ""
		}
		b, err := ParseS3("s3://state?endpoint=" + endpoint + region + tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Check(ctx, envOf(tc.env), nil)
		if (tc.fault == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.fault)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.fault)
		}
		if err != nil && strings.Contains(err.Error(), "operator-secret-1") {
			t.Errorf("%s: the error shows the secret: %v", tc.name, err)
		}
	}

	// Nothing listens: the endpoint is named, quickly.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	down, _ := ParseS3("s3://state?region=us-east-1&endpoint=http://" + closed)
	start := time.Now()
	if _, err := down.Check(ctx, envOf(good), nil); err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), closed) {
		t.Errorf("a server that is down: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a refused connection took %s to report", d)
	}
}

// The stack's checkpoint and locks are where the real Pulumi CLI keeps
// them in the bucket.
func TestStackAndLocksWhereThePulumiCLIKeepsThem(t *testing.T) {
	ctx := t.Context()
	pulumi := toolstest.Require(t, "pulumi")
	endpoint := s3test.Server(t, "operator", "operator-secret-1")
	env := map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1"}
	url := "s3://state/team?endpoint=" + endpoint + "&s3ForcePathStyle=true&region=us-east-1"
	b, _ := ParseS3(url)
	c, _, err := b.Client(envOf(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(ctx, "state", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.HasStack(ctx, c, "homelab", "lab"); ok || err != nil {
		t.Fatalf("a stack before any: %v %v", ok, err)
	}
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte("name: homelab\nruntime: go\n"), 0o600)
	cmd := exec.CommandContext(ctx, pulumi, "stack", "init", "lab", "--non-interactive")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PULUMI_HOME="+filepath.Join(work, "home"), "PULUMI_BACKEND_URL="+url,
		"AWS_ACCESS_KEY_ID=operator", "AWS_SECRET_ACCESS_KEY=operator-secret-1", "PULUMI_CONFIG_PASSPHRASE=p", "PULUMI_SKIP_UPDATE_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pulumi stack init: %v\n%s", err, out)
	}
	// An empty stack is not one a cluster was built with.
	if ok, err := b.HasStack(ctx, c, "homelab", "lab"); ok || err != nil {
		t.Errorf("the empty stack pulumi made counts as holding resources: %v %v", ok, err)
	}
	state := `{"version":3,"checkpoint":{"stack":"organization/homelab/lab","latest":{"resources":[{"urn":"urn:pulumi:lab::homelab::pulumi:pulumi:Stack::homelab-lab"}]}}}`
	stackKey := "team/" + StackFile("homelab", "lab")
	if _, err := c.StatObject(ctx, "state", stackKey, minio.StatObjectOptions{}); err != nil {
		t.Fatalf("pulumi keeps the stack elsewhere than %s: %v", stackKey, err)
	}
	if _, err := c.PutObject(ctx, "state", stackKey, strings.NewReader(state), int64(len(state)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.HasStack(ctx, c, "homelab", "lab"); !ok || err != nil {
		t.Errorf("a stack with a resource is not found: %v %v", ok, err)
	}

	// A lock as Pulumi's self-managed backend writes one (lock.go).
	key := "team/" + LockDir("homelab", "lab") + "/0b6e.json"
	body := fmt.Sprintf(`{"pid":4242,"username":"ops","hostname":"laptop","timestamp":%q}`, time.Now().UTC().Format(time.RFC3339))
	if _, err := c.PutObject(ctx, "state", key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	locks, err := b.Locks(ctx, c, "homelab", "lab")
	if err != nil || len(locks) != 1 || locks[0].Pid != 4242 || locks[0].Hostname != "laptop" || locks[0].Key != key {
		t.Fatalf("locks %+v %v", locks, err)
	}
	if err := b.RemoveLock(ctx, c, locks[0]); err != nil {
		t.Fatal(err)
	}
	if locks, _ := b.Locks(ctx, c, "homelab", "lab"); len(locks) != 0 {
		t.Errorf("a removed lock is still listed: %+v", locks)
	}
}
