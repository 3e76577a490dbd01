package etcdsnapshot

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

func TestNoScheduleNoFiles(t *testing.T) {
	if f, err := Files(nil, "cp-1"); err != nil || f != nil {
		t.Errorf("%v %v", f, err)
	}
}

func TestTimer(t *testing.T) {
	for _, c := range []struct {
		schedule string
		want     []string
	}{
		{"6h", []string{"OnBootSec=21600s", "OnUnitActiveSec=21600s", "AccuracySec=60s"}},
		{"20s", []string{"OnUnitActiveSec=20s", "AccuracySec=2s"}},
		{"daily", []string{"OnCalendar=daily", "Persistent=true"}},
	} {
		files, err := Files(&inventory.Snapshots{Schedule: c.schedule, Keep: 3}, "cp-1")
		if err != nil {
			t.Fatal(err)
		}
		timer := string(files[2].Content)
		for _, w := range c.want {
			if !strings.Contains(timer, "\n"+w+"\n") {
				t.Errorf("%s: timer lacks %s:\n%s", c.schedule, w, timer)
			}
		}
	}
}

// The script, run with stand-ins for etcdctl and date (a node's are real),
// saves each snapshot with its checksum and etcd's status, and keeps the
// newest N; a failed etcdctl leaves nothing behind.
func TestScriptKeepsTheNewest(t *testing.T) {
	files, err := Files(&inventory.Snapshots{Schedule: "1h", Keep: 2}, "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	dir, bin := t.TempDir(), t.TempDir()
	script := filepath.Join(bin, "snapshot")
	os.WriteFile(script, []byte(strings.ReplaceAll(string(files[0].Content), Dir, dir)), 0o755)
	os.WriteFile(filepath.Join(bin, "etcdctl"), []byte(`#!/bin/sh
[ -f "$FAIL" ] && exit 1
for a; do last=$a; done
case "$*" in *"snapshot save"*) echo db > "$last";; *"endpoint status"*) echo '[{"Status":{"header":{"cluster_id":1}}}]';; *) echo '{}';; esac
`), 0o755)
	os.WriteFile(filepath.Join(bin, "date"), []byte(`#!/bin/sh
n=$(cat "$COUNTER" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNTER"; printf '2026120%dT000000Z\n' "$n"
`), 0o755)
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "COUNTER="+filepath.Join(t.TempDir(), "n"), "FAIL="+filepath.Join(bin, "fail"))
	run := func() error {
		cmd := exec.Command(script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s", out)
		}
		return err
	}
	for i := 0; i < 3; i++ {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(bin, "fail"), nil, 0o644)
	if run() == nil {
		t.Error("the script succeeded though etcdctl failed")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	want := []string{"snapshot-20261202T000000Z.db", "snapshot-20261202T000000Z.db.sha256", "snapshot-20261202T000000Z.etcd.json",
		"snapshot-20261203T000000Z.db", "snapshot-20261203T000000Z.db.sha256", "snapshot-20261203T000000Z.etcd.json"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("left in the snapshot directory:\n%v\nwant\n%v", names, want)
	}
}
