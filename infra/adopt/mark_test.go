package adopt

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

func TestMarkScriptGolden(t *testing.T) {
	scriptstest.Golden(t, markScript(nodefacts.InitMarker), "")
}

// The marker is written where kubeadm's directory is, in the real sh, and
// refused where it is not.
func TestMarkScriptNeedsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "kubernetes", "homelab-init.done")
	if out, err := exec.Command("sh", "-c", markScript(marker).String()).CombinedOutput(); err == nil {
		t.Errorf("marked without the directory: %s", out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the marker: %v", err)
	}
	os.Mkdir(filepath.Dir(marker), 0o755)
	if out, err := exec.Command("sh", "-c", markScript(marker).String()).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the marker: %v", err)
	}
}
