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
	for name, script := range map[string]string{"aside": asideScript(), "back": backScript(controlPlanePods...)} {
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

// Each restore keeps the data it replaced in a directory of its own: a
// second restore on the same node, even within the same second, keeps
// the first one's. The script runs in a real sh over real directories.
func TestRestoresKeepEveryReplacedData(t *testing.T) {
	root := t.TempDir()
	data, before := filepath.Join(root, "etcd"), filepath.Join(root, "before")
	script := strings.ReplaceAll(moveAsideScript(data), BeforeRestoreDir, before)
	var kept []string
	for i, content := range []string{"first cluster", "second cluster"} {
		os.MkdirAll(filepath.Join(data, "member", "snap"), 0o700)
		os.WriteFile(filepath.Join(data, "member", "snap", "db"), []byte(content), 0o600)
		out, err := exec.Command("sh", "-c", "set -e\n"+script).CombinedOutput()
		if err != nil {
			t.Fatalf("restore %d: %v %s", i+1, err, out)
		}
		at := strings.TrimSuffix(strings.TrimPrefix(keptAt(string(out)), " (the old data kept in "), ")")
		if db, err := os.ReadFile(filepath.Join(at, "snap", "db")); err != nil || string(db) != content {
			t.Errorf("restore %d: the replaced data at %q: %q %v", i+1, at, db, err)
		}
		kept = append(kept, at)
	}
	if kept[0] == kept[1] {
		t.Errorf("both restores kept their data in %s", kept[0])
	}
	if db, err := os.ReadFile(filepath.Join(kept[0], "snap", "db")); err != nil || string(db) != "first cluster" {
		t.Errorf("the second restore took the first one's data: %q %v", db, err)
	}
	if fi, err := os.Stat(before); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v", before, fi, err)
	}
	out, err := exec.Command("sh", "-c", "set -e\n"+script).CombinedOutput()
	if err != nil || keptAt(string(out)) != " (there was no old data)" {
		t.Errorf("no data to keep: %v %q", err, out)
	}
}
