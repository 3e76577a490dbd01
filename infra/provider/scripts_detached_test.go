package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestDetachedScriptsGolden(t *testing.T) {
	d := runsDir + "/" + joinRun
	inner := scripts.Render("detached/remove", detachedArgs{Dir: runsDir + "/" + aptRun})
	scriptstest.Golden(t, detachedStart(d, "0123456789abcdef", inner.String()), "")
	scriptstest.Golden(t, detachedPoll(d), "")
	scriptstest.Golden(t, scripts.Render("detached/remove", detachedArgs{Dir: d}), "")
	scriptstest.Golden(t, scripts.Render("detached/process", detachedArgs{Dir: d}), "")
}

// A detached run runs a whole rendered script, name line and header
// included, as the node's sh gets it nested in the start script; its
// output and exit code come back through the poll, and the remove leaves
// nothing. Run here, in sh, as on a node.
func TestDetachedRunsARenderedScript(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	d := filepath.Join(runs, "step")
	// The nested script: another run's poll, whose answer is known.
	other := filepath.Join(runs, "other's")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	for f, content := range map[string]string{"rc": "7\n", "out": "it said 'no'\n"} {
		if err := os.WriteFile(filepath.Join(other, f), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inner := scripts.Render("detached/poll", detachedArgs{Dir: other})
	sh := func(s scripts.Script) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", s.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Name(), err, out)
		}
		return string(out)
	}
	if out := sh(detachedStart(d, "0123456789abcdef", inner.String())); out != "started\n" {
		t.Fatalf("start: %q", out)
	}
	poll := scripts.Render("detached/poll", detachedArgs{Dir: d})
	deadline := time.Now().Add(10 * time.Second)
	out := sh(poll)
	for !strings.HasPrefix(out, "rc=") {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %q", out)
		}
		time.Sleep(20 * time.Millisecond)
		out = sh(poll)
	}
	if want := "rc=0\nrc=7\nit said 'no'\n"; out != want {
		t.Errorf("poll: %q, want %q", out, want)
	}
	// Finished and not collected: a start of the same command keeps it.
	if out := sh(detachedStart(d, "0123456789abcdef", inner.String())); out != "finished\n" {
		t.Errorf("a second start: %q, want finished", out)
	}
	sh(scripts.Render("detached/remove", detachedArgs{Dir: d}))
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Errorf("the run's directory after remove: %v", err)
	}
}

// One poll waits on the node for the run to end and answers within a
// fifth of a second of it, and it answers at once for a run whose
// process is gone: it neither misses an end nor sits out its wait on a
// run that can no longer end. Run here, in sh, as on a node.
func TestDetachedPollWaitsForTheEnd(t *testing.T) {
	sh := func(s string) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", s).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	d := filepath.Join(t.TempDir(), "runs", "step")
	if out := sh(detachedStart(d, "0123456789abcdef", "sleep 1; echo done").String()); out != "started\n" {
		t.Fatalf("start: %q", out)
	}
	began := time.Now()
	if out := sh(detachedPoll(d).String()); out != "rc=0\ndone\n" {
		t.Errorf("one poll of a run that ends after a second: %q, want its end", out)
	}
	if waited := time.Since(began); waited >= pollWait {
		t.Errorf("the poll answered after %s, its whole wait: it did not see the end", waited)
	}

	lost := filepath.Join(t.TempDir(), "runs", "lost")
	if err := os.MkdirAll(lost, 0o700); err != nil {
		t.Fatal(err)
	}
	// A pid no process has: the kernel's pid_max is far below it.
	if err := os.WriteFile(filepath.Join(lost, "pid"), []byte("2147483647\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	if out := sh(detachedPoll(lost).String()); out != "lost\n" {
		t.Errorf("a poll of a run whose process is gone: %q, want lost", out)
	}
	if waited := time.Since(began); waited > pollWait/2 {
		t.Errorf("the poll of a lost run answered after %s: it sat out its wait", waited)
	}
}
