package initd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

func countLines(t *testing.T, p string) int {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

// A timer started long after boot fires at once for its past OnBootSec=,
// then every OnUnitActiveSec= from the unit's last activation; a start
// skipped for an unmet condition still counts (the timer's last trigger),
// so the timer keeps firing; stop ends it.
func TestTimerFiresOnSchedule(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "runs")
	m := newTestManager(t, map[string]string{
		"tick.timer":   "[Timer]\nOnBootSec=1s\nOnUnitActiveSec=1s\nAccuracySec=100ms\n[Install]\nWantedBy=timers.target\n",
		"tick.service": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo x >> " + out + "'\n",
		"cond.timer":   "[Timer]\nOnActiveSec=200ms\nOnUnitActiveSec=500ms\n",
		"cond.service": "[Unit]\nConditionPathExists=/flag\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo y >> " + out + ".cond'\n",
	})
	m.booted = time.Now().Add(-time.Hour)
	if r := m.Handle(Request{Op: "start", Units: []string{"tick.timer", "cond.timer"}}); !r.OK {
		t.Fatalf("start: %+v", r)
	}
	st := m.Status("tick.timer")
	if st.ActiveState != "active" || st.SubState != "waiting" || st.Triggers != "tick.service" {
		t.Errorf("timer status: %+v", st)
	}
	time.Sleep(3500 * time.Millisecond)
	if n := countLines(t, out); n < 3 || n > 5 {
		t.Errorf("tick.service ran %d times in 3.5 s, want one at start and about one a second", n)
	}
	if n := countLines(t, out+".cond"); n != 0 {
		t.Errorf("cond.service ran %d times though its condition fails", n)
	}
	os.WriteFile(m.Paths.Path("/flag"), nil, 0o644)
	time.Sleep(1500 * time.Millisecond)
	if n := countLines(t, out+".cond"); n < 1 {
		t.Error("the timer stopped firing after a start skipped for its condition")
	}
	st = m.Status("tick.timer")
	if st.NextElapse == "" || st.LastTrigger == "" {
		t.Errorf("a running timer shows no next or last elapse: %+v", st)
	}
	if r := m.Handle(Request{Op: "stop", Units: []string{"tick.timer"}}); !r.OK {
		t.Fatal(r)
	}
	// Stopping a timer leaves a run it already started to finish, as in
	// systemd: count from when that run is over. A run the timer began
	// just before the stop may not show as activating yet on a busy
	// machine, so the count must also hold still for a while.
	n := -1
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if m.Status("tick.service").ActiveState == "activating" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		c := countLines(t, out)
		if c == n {
			break
		}
		n = c
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if countLines(t, out) != n || m.Status("tick.timer").ActiveState != "inactive" {
		t.Error("a stopped timer still fires")
	}
}

// Enabling a timer links it into timers.target, which boot starts; a timer
// without a trigger, with an unsupported calendar or for a missing unit
// does not start, as in systemd.
func TestTimerBootAndRefusals(t *testing.T) {
	m := newTestManager(t, map[string]string{
		"a.timer":      "[Timer]\nOnCalendar=daily\nPersistent=true\n[Install]\nWantedBy=timers.target\n",
		"a.service":    "[Service]\nType=oneshot\nExecStart=/bin/true\n",
		"empty.timer":  "[Timer]\nAccuracySec=1s\n",
		"cron.timer":   "[Timer]\nOnCalendar=*-*-* 03:00:00\n",
		"cron.service": "[Service]\nType=oneshot\nExecStart=/bin/true\n",
		"orphan.timer": "[Timer]\nOnActiveSec=1h\n",
	})
	if _, err := unitfile.Enable(m.Paths, "a.timer"); err != nil {
		t.Fatal(err)
	}
	if got := unitfile.BootUnits(m.Paths); len(got) != 1 || got[0] != "a.timer" {
		t.Fatalf("boot units %v", got)
	}
	m.Boot()
	deadline := time.Now().Add(2 * time.Second)
	for m.Status("a.timer").ActiveState != "active" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := m.Status("a.timer")
	next, err := time.Parse(time.RFC3339Nano, st.NextElapse)
	if st.ActiveState != "active" || err != nil || next.Hour() != 0 || next.Minute() != 0 || !next.After(time.Now()) {
		t.Errorf("a daily timer after boot: %+v", st)
	}
	for _, u := range []string{"empty.timer", "cron.timer", "orphan.timer"} {
		if r := m.Handle(Request{Op: "start", Units: []string{u}}); r.OK {
			t.Errorf("%s started: %+v", u, m.Status(u))
		}
	}
}

func TestNextCalendar(t *testing.T) {
	at := time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC) // a Wednesday
	for name, want := range map[string]time.Time{
		"hourly":    time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC),
		"daily":     time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
		"weekly":    time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC),
		"monthly":   time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		"quarterly": time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := unitfile.NextCalendar(name, at); !got.Equal(want) {
			t.Errorf("%s after %s: %s, want %s", name, at, got, want)
		}
	}
}
