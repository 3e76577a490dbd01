package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/procfs"

	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/statebackend"
	"github.com/homelab-dev/homelab/infra/statebackend/s3test"
)

// A lock whose process is gone from this host is cleared, in a file
// backend and in an S3 bucket alike; a live process's lock and another
// host's stay.
func TestClearStaleLocks(t *testing.T) {
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{StateDir: dir, Stack: "lab"}
			var write func(name string, pid int, host string)
			var exists func(name string) bool
			lockDir := statebackend.LockDir(program.Project, "lab")
			if kind == "file" {
				locks := filepath.Join(dir, "backend", filepath.FromSlash(lockDir))
				if err := os.MkdirAll(locks, 0o700); err != nil {
					t.Fatal(err)
				}
				write = func(name string, pid int, host string) {
					os.WriteFile(filepath.Join(locks, name), []byte(fmt.Sprintf(`{"pid":%d,"username":"root","hostname":%q}`, pid, host)), 0o600)
				}
				exists = func(name string) bool { _, err := os.Stat(filepath.Join(locks, name)); return err == nil }
			} else {
				endpoint := s3test.Server(t, "operator", "operator-secret-1", "state")
				o.Backend = "s3://state/homelab?region=us-east-1&s3ForcePathStyle=true&endpoint=" + endpoint
				o.Env = map[string]string{"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator-secret-1"}
				b, _ := statebackend.ParseS3(o.Backend)
				c, _, err := b.Client(envOf(o), nil)
				if err != nil {
					t.Fatal(err)
				}
				key := func(name string) string { return "homelab/" + lockDir + "/" + name }
				write = func(name string, pid int, host string) {
					body := fmt.Sprintf(`{"pid":%d,"username":"root","hostname":%q}`, pid, host)
					if _, err := c.PutObject(t.Context(), "state", key(name), strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				exists = func(name string) bool {
					_, err := c.StatObject(t.Context(), "state", key(name), minio.StatObjectOptions{})
					return err == nil
				}
			}
			write("a.json", dead.Process.Pid, host)
			write("b.json", os.Getpid(), host)
			write("c.json", dead.Process.Pid, "another-host")
			var said int
			if err := clearStaleLocks(t.Context(), o, func(string, ...any) { said++ }); err != nil {
				t.Fatal(err)
			}
			if exists("a.json") {
				t.Error("the lock of a dead process stayed")
			}
			for _, name := range []string{"b.json", "c.json"} {
				if !exists(name) {
					t.Errorf("%s removed: a live process's or another host's lock must stay", name)
				}
			}
			if said != 1 {
				t.Errorf("told the user %d times", said)
			}
		})
	}
	if err := clearStaleLocks(t.Context(), Options{Backend: "https://api.pulumi.com"}, nil); err != nil {
		t.Error(err)
	}
}

// Two stacks on one machine (two clusters, or tests on labs side by side)
// tell their pulumi processes apart by the PULUMI_HOME each gives them: one
// stack's killed up must not wait for, or signal, the other's.
func TestProcessesAreToldApartByStack(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	child := exec.Command("sleep", "60")
	child.Env = []string{"PULUMI_HOME=" + pulumiHome(ours)}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	p, err := procfs.NewProc(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Start returns as the child execs: until the kernel has set up the
	// new program, /proc shows an empty environment (measured on 6.18).
	// The processes runsFor is asked about have long run.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if env, err := p.Environ(); err == nil && len(env) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if !runsFor(p, pulumiHome(ours)) {
		t.Error("a process of our stack was not counted as ours")
	}
	if runsFor(p, pulumiHome(theirs)) {
		t.Error("a process of another stack was counted as ours")
	}
	if !runsFor(p, "") {
		t.Error(`"" must mean any stack`)
	}
}

// The macs output as the engine hands it back: node to list of MACs.
func TestMACsOutput(t *testing.T) {
	got := macsOutput(map[string]any{"cp-1": []any{"52:54:00:0a:00:78"}, "gpu-1": []any{"aa:bb:cc:dd:ee:01", "aa:bb:cc:dd:ee:02"}, "none": []any{}})
	if len(got) != 2 || got["cp-1"][0] != "52:54:00:0a:00:78" || len(got["gpu-1"]) != 2 {
		t.Errorf("macsOutput: %v", got)
	}
	if macsOutput(nil) != nil || macsOutput("x") != nil {
		t.Error("no output read as MACs")
	}
}
