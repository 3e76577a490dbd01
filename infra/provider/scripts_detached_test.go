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
	scriptstest.Golden(t, scripts.Render("detached/poll", detachedArgs{Dir: d}), "")
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
