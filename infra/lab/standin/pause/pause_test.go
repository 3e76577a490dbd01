package pause

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestVersionFlagExitsAtOnce(t *testing.T) {
	for _, args := range [][]string{{"-v"}, {"x", "-V"}} {
		var out, errb bytes.Buffer
		// No signal ever comes: -v must not wait for one.
		code := run("/pause", args, "/usr/lib/homelab/images/registry.k8s.io/pause/3.10.1/pause", 7, &out, &errb, nil)
		if code != 0 || out.String() != "/pause version: 3.10.1\n" || errb.Len() != 0 {
			t.Errorf("run %q = %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

func TestWaitsForASignal(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	done := make(chan int)
	var errb bytes.Buffer
	go func() { done <- run("/pause", nil, "/x/pause", 7, &bytes.Buffer{}, &errb, sigs) }()
	select {
	case code := <-done:
		t.Fatalf("exited %d without a signal", code)
	case <-time.After(200 * time.Millisecond):
	}
	sigs <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	if want := "Warning: pause should be the first process\nShutting down, got signal: Terminated\n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
}

func TestVersion(t *testing.T) {
	if v := Version("/usr/lib/homelab/images/registry.k8s.io/pause/3.10/pause"); v != "3.10" {
		t.Errorf("Version = %q", v)
	}
	if v := Version("/usr/local/bin/homelab-node"); v != "homelab-standin" {
		t.Errorf("Version outside the tree = %q", v)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_CHILD") == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// The process itself, as the image's binary (a hard link, as in the lab's
// tree): -v prints the image's tag and exits 0, and without it SIGTERM
// ends it with 0.
func TestProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry.k8s.io", "pause", "3.10.1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pause")
	if err := os.Link(self, bin); err != nil {
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-v")
	cmd.Env = append(os.Environ(), "PAUSE_TEST_CHILD=1")
	out, err := cmd.Output()
	if err != nil || string(out) != bin+" version: 3.10.1\n" {
		t.Fatalf("pause -v: %q %v", out, err)
	}
	cmd = exec.Command(bin)
	cmd.Env = append(os.Environ(), "PAUSE_TEST_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("pause after SIGTERM: %v (%s)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Shutting down, got signal: Terminated") {
		t.Errorf("stderr %q", stderr.String())
	}
}
