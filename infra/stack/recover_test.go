package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestClearStaleLocks(t *testing.T) {
	dir := t.TempDir()
	locks := filepath.Join(dir, ".pulumi", "locks", "organization", "p", "s")
	if err := os.MkdirAll(locks, 0o700); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(name string, pid int, host string) string {
		p := filepath.Join(locks, name)
		os.WriteFile(p, []byte(fmt.Sprintf(`{"pid":%d,"username":"root","hostname":%q}`, pid, host)), 0o600)
		return p
	}
	stale := write("a.json", dead.Process.Pid, host)
	live := write("b.json", os.Getpid(), host)
	other := write("c.json", dead.Process.Pid, "another-host")
	var said int
	if err := clearStaleLocks("file://"+dir, "", func(string, ...any) { said++ }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("the lock of a dead process stayed")
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: a live process's or another host's lock must stay", filepath.Base(p))
		}
	}
	if said != 1 {
		t.Errorf("told the user %d times", said)
	}
	if err := clearStaleLocks("s3://bucket", "", nil); err != nil {
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
