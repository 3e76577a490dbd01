package etcdbackup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/inventory"
)

func TestRestoreScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, asideScript(), "")
	scriptstest.Golden(t, backScript(controlPlanePods...), "")
	scriptstest.Golden(t, moveAsideScript("/var/lib/etcd"), "")
	scriptstest.Golden(t, scripts.Render("etcd/restore-data", restoreDataArgs{moveAsideArgs: moveAsideOf("/var/lib/etcd"), Upload: upload}), "")
	scriptstest.Golden(t, readyzScript(""), "")
	scriptstest.Golden(t, readyzScript("https://10.0.0.11:6443"), "node")
	scriptstest.Golden(t, scripts.Render("etcd/drop-aside-manifest", struct{ Path string }{AsideDir + "/etcd.yaml"}), "")
	inv := &inventory.Inventory{}
	scriptstest.Golden(t, Target{Inventory: inv}.listeners(), "")
	scriptstest.Golden(t, snapshotNowScript(), "")
	scriptstest.Golden(t, scripts.Render("etcd/seed", seedArgs{restoreDataArgs: restoreDataArgs{moveAsideArgs: moveAsideOf("/var/lib/etcd"), Upload: upload}, Marker: "/etc/kubernetes/.homelab-init-complete"}), "")
}

// Moving the control plane aside and back, in dash and bash over real
// directories, leaves the manifests as they were and no aside directory.
func TestAsideAndBack(t *testing.T) {
	for _, sh := range []string{"sh", "bash"} {
		root := t.TempDir()
		m, aside := filepath.Join(root, "m"), filepath.Join(root, "aside")
		os.MkdirAll(m, 0o755)
		for _, p := range []string{"etcd", "kube-apiserver"} {
			os.WriteFile(filepath.Join(m, p+".yaml"), []byte(p), 0o600)
		}
		steps := []podsArgs{
			{ManifestDir: m, AsideDir: aside, Pods: controlPlanePods},
			{ManifestDir: m, AsideDir: aside, Pods: []string{"etcd"}},
			{ManifestDir: m, AsideDir: aside, Pods: controlPlanePods[1:]},
		}
		for i, a := range steps {
			name := "etcd/back"
			if i == 0 {
				name = "etcd/aside"
			}
			if out, err := exec.Command(sh, "-c", scripts.Render(name, a).String()).CombinedOutput(); err != nil {
				t.Fatalf("%s: %s: %v %s", sh, name, err, out)
			}
			if i == 0 {
				if entries, _ := os.ReadDir(m); len(entries) != 0 {
					t.Errorf("%s: manifests left after aside: %v", sh, entries)
				}
			}
		}
		entries, _ := os.ReadDir(m)
		if len(entries) != 2 {
			t.Errorf("%s: manifests after aside and back: %v", sh, entries)
		}
		if _, err := os.Stat(aside); !os.IsNotExist(err) {
			t.Errorf("%s: the aside directory stays: %v", sh, err)
		}
	}
}

// Each restore keeps the data it replaced in a directory of its own: a
// second restore on the same node, even within the same second, keeps
// the first one's. The script runs in a real sh over real directories.
func TestRestoresKeepEveryReplacedData(t *testing.T) {
	root := t.TempDir()
	data, before := filepath.Join(root, "etcd"), filepath.Join(root, "before")
	script := scripts.Render("etcd/move-aside", moveAsideArgs{DataDir: data, BeforeDir: before, KeptPrefix: keptPrefix}).String()
	var kept []string
	for i, content := range []string{"first cluster", "second cluster"} {
		os.MkdirAll(filepath.Join(data, "member", "snap"), 0o700)
		os.WriteFile(filepath.Join(data, "member", "snap", "db"), []byte(content), 0o600)
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
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
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil || keptAt(string(out)) != " (there was no old data)" {
		t.Errorf("no data to keep: %v %q", err, out)
	}
}

// The restored data goes in place, in dash and bash, the data there before
// kept aside, the upload removed.
func TestRestoreDataInARealShell(t *testing.T) {
	for _, sh := range []string{"sh", "bash"} {
		root := t.TempDir()
		src, data, before, up := filepath.Join(root, "src"), filepath.Join(root, "etcd"), filepath.Join(root, "before"), filepath.Join(root, "restore.tgz")
		os.MkdirAll(filepath.Join(src, "member", "snap"), 0o700)
		os.WriteFile(filepath.Join(src, "member", "snap", "db"), []byte("restored"), 0o600)
		if out, err := exec.Command("tar", "czf", up, "-C", src, "member").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		os.MkdirAll(filepath.Join(data, "member", "snap"), 0o700)
		os.WriteFile(filepath.Join(data, "member", "snap", "db"), []byte("old"), 0o600)
		args := restoreDataArgs{moveAsideArgs: moveAsideArgs{DataDir: data, BeforeDir: before, KeptPrefix: keptPrefix}, Upload: up}
		out, err := exec.Command(sh, "-c", scripts.Render("etcd/restore-data", args).String()).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v %s", sh, err, out)
		}
		if db, err := os.ReadFile(filepath.Join(data, "member", "snap", "db")); err != nil || string(db) != "restored" {
			t.Errorf("%s: data in place: %q %v", sh, db, err)
		}
		at := strings.TrimSuffix(strings.TrimPrefix(keptAt(string(out)), " (the old data kept in "), ")")
		if db, err := os.ReadFile(filepath.Join(at, "snap", "db")); err != nil || string(db) != "old" {
			t.Errorf("%s: the old data at %q: %q %v", sh, at, db, err)
		}
		if _, err := os.Stat(up); !os.IsNotExist(err) {
			t.Errorf("%s: the upload stays: %v", sh, err)
		}
	}
}
