package stack

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/statebackend"
)

// useLabS3 keeps this test's Pulumi state in the lab's S3 bucket, as
// operators sharing one state do (docs/state.md). First, a bucket that
// cannot be reached and keys the server refuses each stop the command
// with the part to fix named, before anything else: no node is touched,
// no secrets bundle made.
func (e *e2e) useLabS3(ctx context.Context) {
	e.t.Helper()
	endpoint, env := e.lab.S3(ctx)
	url := lab.S3StateURL(endpoint)
	for _, bad := range []struct {
		name, url string
		env       map[string]string
		want      string
	}{
		{"keys the server refuses", url, map[string]string{"AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "refused the credentials from AWS_ACCESS_KEY_ID"},
		{"a server that does not answer", lab.S3StateURL("http://127.0.0.1:1"), env, "cannot reach http://127.0.0.1:1"},
		{"a bucket the server lacks", strings.Replace(url, "s3://"+lab.S3Bucket+"/", "s3://no-such-bucket/", 1), env, `bucket "no-such-bucket" does not exist`},
	} {
		o := e.options(e.invPath)
		o.Backend, o.Env = bad.url, bad.env
		_, err := Open(ctx, o)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			e.t.Errorf("opening the stack with %s: %v, want an error saying %q", bad.name, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), env["AWS_SECRET_ACCESS_KEY"]) {
			e.t.Errorf("the error shows the secret key: %v", err)
		}
	}
	if cmds, _ := os.ReadFile(e.cmdLog); len(cmds) > 0 {
		e.t.Errorf("a refused state backend ran commands on the nodes:\n%s", cmds)
	}
	if bundles, _ := filepath.Glob(filepath.Join(e.stateDir, "*", "secrets.yaml")); len(bundles) > 0 {
		e.t.Errorf("a refused state backend made a secrets bundle: %v", bundles)
	}
	e.backend, e.backendEnv = url, env
}

// upWithSecondOperator runs up on s while a second operator, on another
// state directory but the same S3 state, tries the stack: without the
// cluster's secrets bundle, then without the state's passphrase, they are
// refused before anything is made (a new bundle would match no node, a
// new passphrase decrypt none of the state's secrets); with both, their
// refresh is refused by Pulumi's lock, naming the run that holds it. The
// first up finishes as if alone.
func (e *e2e) upWithSecondOperator(ctx context.Context, s *Stack) {
	e.t.Helper()
	other := e.options(e.invPath)
	other.StateDir = filepath.Join(e.work, "second-operator")
	if _, err := Open(ctx, other); err == nil || !strings.Contains(err.Error(), "exists in the state backend") || !strings.Contains(err.Error(), "--secrets") {
		e.t.Errorf("a second operator without the bundle: %v", err)
	}
	if bundles, _ := filepath.Glob(filepath.Join(other.StateDir, "*", "secrets.yaml")); len(bundles) > 0 {
		e.t.Errorf("a second operator without the bundle got a new one: %v", bundles)
	}
	other.Secrets = BundlePath(e.stateDir, s.Inv.Cluster.Name)
	if _, err := Open(ctx, other); err == nil || !strings.Contains(err.Error(), "no passphrase") || !strings.Contains(err.Error(), "PULUMI_CONFIG_PASSPHRASE_FILE") {
		e.t.Errorf("a second operator without the passphrase: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other.StateDir, "passphrase")); err == nil {
		e.t.Error("a second operator without the passphrase got a new one")
	}
	other.Env = maps.Clone(e.backendEnv)
	other.Env["PULUMI_CONFIG_PASSPHRASE_FILE"] = filepath.Join(e.stateDir, "passphrase")
	second, err := Open(ctx, other)
	if err != nil {
		e.t.Fatalf("a second operator with the bundle: %v", err)
	}

	b, err := statebackend.ParseS3(e.backend)
	if err != nil {
		e.t.Fatal(err)
	}
	c, _, err := b.Client(func(k string) string { return e.backendEnv[k] }, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Up(ctx, true)
		done <- err
	}()
	var holder statebackend.Lock
	for deadline := time.Now().Add(2 * time.Minute); holder.Pid == 0; time.Sleep(200 * time.Millisecond) {
		locks, err := b.Locks(ctx, c, program.Project, s.Inv.Cluster.Name)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(locks) > 0 {
			holder = locks[0]
		}
		select {
		case err := <-done:
			e.t.Fatalf("the first up ended (%v) before its lock was seen in the bucket", err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the first up's lock never appeared in the bucket")
		}
	}
	_, err = second.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), "another run holds this stack's state") || !strings.Contains(err.Error(), fmt.Sprintf("@%s (pid %d)", holder.Hostname, holder.Pid)) {
		e.t.Errorf("a second operator's refresh while the first up runs: %v", err)
	}
	if err := <-done; err != nil {
		e.t.Fatalf("the first up, beside the refused refresh: %v", err)
	}
	if locks, _ := b.Locks(ctx, c, program.Project, s.Inv.Cluster.Name); len(locks) > 0 {
		e.t.Errorf("locks left in the bucket after both runs: %+v", locks)
	}
}
