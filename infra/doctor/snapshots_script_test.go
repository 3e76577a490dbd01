package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

func TestSnapshotScriptGolden(t *testing.T) {
	scriptstest.Golden(t, snapshotScript(), "")
}

// doctor's reading of a node's snapshots, from the real sh, systemctl,
// date and stat: the newest snapshot and its age by the node's clock, and
// a timer that is not running read as such.
func TestSnapshotScriptInARealShell(t *testing.T) {
	dir := t.TempDir()
	newest := filepath.Join(dir, "snapshot-20261204T000000Z.db")
	for _, p := range []string{filepath.Join(dir, "snapshot-20261203T000000Z.db"), newest, filepath.Join(dir, "x.db")} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(newest, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	args := snapshotsArgs{Timer: "homelab-no-such-unit.timer", ListingArgs: etcdbackup.ListingArgs{Dir: dir, Pattern: etcdsnapshot.NamePattern}}
	out, err := exec.Command("sh", "-c", scripts.Render("doctor/snapshots", args).String()).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := parseSnapshots(string(out))
	if !s.read || s.timerActive || s.count != 2 || s.newest != "snapshot-20261204T000000Z.db" || s.age < 59*time.Minute || s.age > 2*time.Hour {
		t.Errorf("read %+v from\n%s", *s, out)
	}
}
