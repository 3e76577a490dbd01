package etcdbackup

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

func TestListingScriptGolden(t *testing.T) {
	scriptstest.Golden(t, ListingScript(), "")
}

// The listing the real sh, grep and stat make of a snapshot directory is
// what ParseListing reads: the timer's snapshots, newest first with their
// times, and nothing else that lies there.
func TestListingScriptInARealShell(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"snapshot-20261203T000000Z.db", "snapshot-20261204T000000Z.db",
		"snapshot-20261204T000000Z.db.sha256", "snapshot-20261204T000000Z.etcd.json", ".snapshot-20261205T000000Z.db", "notes.txt"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mt := at.Add(time.Duration(i) * time.Hour)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("sh", "-c", scripts.Render("etcd/snapshots", ListingArgs{Dir: dir, Pattern: etcdsnapshot.NamePattern}).String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := etcdsnapshot.ParseListing(string(out))
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	if len(got) != 2 || got[0].Name != "snapshot-20261204T000000Z.db" || !got[0].MTime.Equal(at.Add(time.Hour)) || !got[1].MTime.Equal(at) {
		t.Errorf("listed %+v from\n%s", got, out)
	}
	for _, d := range []string{filepath.Join(dir, "missing"), t.TempDir()} {
		out, err := exec.Command("sh", "-c", scripts.Render("etcd/snapshots", ListingArgs{Dir: d, Pattern: etcdsnapshot.NamePattern}).String()).Output()
		if err != nil || len(out) != 0 {
			t.Errorf("%s: %q, %v", d, out, err)
		}
	}
}
