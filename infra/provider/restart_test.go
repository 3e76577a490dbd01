package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// restartPods, run by sh against a component a supervisor loop restarts
// (the kubelet's part), ends the running process, waits for the new one,
// and does not kill the shell that runs it, whose command line carries
// the pattern.
func TestRestartPodsScript(t *testing.T) {
	dir := t.TempDir()
	name := "homelab-test-component-" + strconv.Itoa(os.Getpid())
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pid")
	sup := exec.Command("sh", "-c", `while :; do "$1" 1000 & echo $! > "$2"; wait $!; done`, "sh", bin, pidFile)
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	// The supervisor and its component alone, by process group.
	t.Cleanup(func() { _ = syscall.Kill(-sup.Process.Pid, syscall.SIGKILL); _ = sup.Wait() })
	readPID := func() string {
		for range 100 {
			if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				return strings.TrimSpace(string(b))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("the component never started")
		return ""
	}
	first := readPID()
	os.Remove(pidFile)
	out, err := exec.Command("sh", "-c", restartPods([]string{name})).CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	if second := readPID(); second == first {
		t.Errorf("the component still runs as %s", first)
	}
}
