package cniconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestListScriptGolden(t *testing.T) {
	scriptstest.Golden(t, listScript(ConfDir), "")
}

// The listing, as the real sh and ls make it, is what FromListing reads:
// directories marked, a missing directory an empty answer.
func TestListScriptInARealShell(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "10-a.conflist"), []byte(`{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "05-sub.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", listScript(dir).String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "05-sub.conf/\n10-a.conflist\n" {
		t.Errorf("listing %q", out)
	}
	out, err = exec.Command("sh", "-c", listScript(filepath.Join(dir, "missing")).String()).Output()
	if err != nil || len(out) != 0 {
		t.Errorf("a missing directory: %q, %v", out, err)
	}
}
