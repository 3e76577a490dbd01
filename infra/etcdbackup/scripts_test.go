package etcdbackup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The node scripts parse as POSIX shell (sh -n), and moving the control
// plane aside and back leaves the manifests as they were.
func TestScriptsParse(t *testing.T) {
	for name, script := range map[string]string{"probe": probe, "aside": asideScript(), "back": backScript(controlPlanePods...)} {
		if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("%s: %v %s\n%s", name, err, out, script)
		}
	}
	root := t.TempDir()
	rel := func(s string) string {
		return strings.NewReplacer(manifestDir, filepath.Join(root, "m"), AsideDir, filepath.Join(root, "aside")).Replace(s)
	}
	os.MkdirAll(filepath.Join(root, "m"), 0o755)
	for _, p := range []string{"etcd", "kube-apiserver"} {
		os.WriteFile(filepath.Join(root, "m", p+".yaml"), []byte(p), 0o600)
	}
	for _, step := range []string{asideScript(), backScript("etcd"), backScript(controlPlanePods[1:]...)} {
		if out, err := exec.Command("sh", "-c", "set -e; "+rel(step)).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root, "m"))
	if len(entries) != 2 {
		t.Errorf("manifests after aside and back: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(root, "aside")); !os.IsNotExist(err) {
		t.Errorf("the aside directory stays: %v", err)
	}
}
