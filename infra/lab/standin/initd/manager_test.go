package initd

import (
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// newTestManager runs a Manager inside the test process: no namespaces, so
// no root needed. Its reaper collects the test process's children, which
// are all the manager's own.
func newTestManager(t *testing.T, units map[string]string) *Manager {
	t.Helper()
	root := t.TempDir()
	for name, content := range units {
		p := filepath.Join(root, "/usr/lib/systemd/system", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := NewManager(unitfile.Paths{Root: root})
	m.Log = log.New(io.Discard, "", 0)
	m.StopTimeoutCap = 2 * time.Second
	stop := make(chan struct{})
	go m.reaper.run(stop)
	t.Cleanup(func() {
		m.Shutdown()
		close(stop)
	})
	return m
}

func TestManagerLifecycle(t *testing.T) {
	m := newTestManager(t, map[string]string{
		"a.service":    "[Service]\nExecStart=/bin/sleep 30\nRuntimeDirectory=a-rt\n",
		"once.service": "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\nExecStart=/bin/true\n",
		"cond.service": "[Service]\nExecStart=/bin/sleep 30\n[Unit]\nConditionPathExists=/nope\n",
		"bad.service":  "[Service]\nExecStart=/does/not/exist\n",
		"term.service": "[Service]\nExecStart=/bin/sh -c 'trap \"\" TERM; while :; do sleep 0.1; done'\nTimeoutStopSec=300ms\n",
	})
	if r := m.Handle(Request{Op: "start", Units: []string{"a"}}); !r.OK {
		t.Fatalf("start: %+v", r)
	}
	st := m.Status("a")
	if st.ActiveState != "active" || st.SubState != "running" || st.MainPID == 0 || len(st.Processes) != 1 {
		t.Fatalf("after start: %+v", st)
	}
	rt := filepath.Join(m.Paths.RunDir(), "a-rt")
	if _, err := os.Stat(rt); err != nil {
		t.Errorf("RuntimeDirectory not created: %v", err)
	}
	if r := m.Handle(Request{Op: "stop", Units: []string{"a.service"}}); !r.OK {
		t.Fatalf("stop: %+v", r)
	}
	if st := m.Status("a"); st.ActiveState != "inactive" || st.MainPID != 0 {
		t.Fatalf("after stop: %+v", st)
	}
	if _, err := os.Stat(rt); !os.IsNotExist(err) {
		t.Errorf("RuntimeDirectory left behind: %v", err)
	}

	if r := m.Handle(Request{Op: "start", Units: []string{"once"}}); !r.OK {
		t.Fatalf("oneshot: %+v", r)
	}
	if st := m.Status("once"); st.ActiveState != "active" || st.SubState != "exited" {
		t.Errorf("oneshot with RemainAfterExit: %s/%s", st.ActiveState, st.SubState)
	}

	if r := m.Handle(Request{Op: "start", Units: []string{"cond"}}); !r.OK {
		t.Fatalf("unmet condition must not fail the start: %+v", r)
	}
	if st := m.Status("cond"); st.ActiveState != "inactive" || st.ConditionFail == "" {
		t.Errorf("condition: %+v", st)
	}

	if r := m.Handle(Request{Op: "start", Units: []string{"bad"}}); r.OK || r.Code != 1 {
		t.Errorf("missing executable: %+v", r)
	}
	if st := m.Status("bad"); st.ActiveState != "failed" {
		t.Errorf("missing executable leaves %s", st.ActiveState)
	}
	if r := m.Handle(Request{Op: "restart", Units: []string{"nope"}}); r.OK || r.Code != 5 {
		t.Errorf("unknown unit: %+v", r)
	}

	// A unit ignoring SIGTERM is killed once its stop timeout passes.
	if r := m.Handle(Request{Op: "start", Units: []string{"term"}}); !r.OK {
		t.Fatalf("start term: %+v", r)
	}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	start := time.Now()
	m.Handle(Request{Op: "stop", Units: []string{"term"}})
	if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
		t.Errorf("stop of a TERM-ignoring unit took %v", d)
	}
	if st := m.Status("term"); st.ActiveState != "inactive" || len(st.Processes) != 0 {
		t.Errorf("after SIGKILL: %+v", st)
	}
}

func TestReloadSendsSIGHUPOrRunsExecReload(t *testing.T) {
	// initd handles SIGHUP itself (initd.go), so the services it starts
	// begin with its default action. This test's process does not: run
	// under nohup, it would hand its ignored SIGHUP on to sleep.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	dir := t.TempDir()
	marker := filepath.Join(dir, "reloaded")
	m := newTestManager(t, map[string]string{
		// sleep dies of SIGHUP: a clean exit for systemd, so no restart.
		"hup.service": "[Service]\nExecStart=/bin/sleep 30\n",
		"cmd.service": "[Service]\nExecStart=/bin/sleep 30\nExecReload=/bin/sh -c 'echo $MAINPID > " + marker + "'\n",
	})
	for _, u := range []string{"hup", "cmd"} {
		if r := m.Handle(Request{Op: "start", Units: []string{u}}); !r.OK {
			t.Fatal(r.Error)
		}
	}
	if r := m.Handle(Request{Op: "reload", Units: []string{"hup"}}); !r.OK {
		t.Fatal(r.Error)
	}
	deadline := time.Now().Add(3 * time.Second)
	for m.Status("hup").ActiveState != "inactive" {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reach the main process: %+v", m.Status("hup"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := m.Status("cmd").MainPID
	if r := m.Handle(Request{Op: "reload", Units: []string{"cmd"}}); !r.OK {
		t.Fatal(r.Error)
	}
	b, err := os.ReadFile(marker)
	if err != nil || string(b) != strconv.Itoa(pid)+"\n" {
		t.Fatalf("ExecReload saw MAINPID %q (%v), want %d", b, err, pid)
	}
	if r := m.Handle(Request{Op: "reload", Units: []string{"hup"}}); r.OK {
		t.Error("reloading an inactive unit must fail")
	}
}

// ExecStopPost= runs however the main process ended, with systemd's
// SERVICE_RESULT, EXIT_CODE and EXIT_STATUS: keepalived's drop-in relies on
// it to take the VIP off a node whose keepalived was SIGKILLed.
func TestExecStopPostRunsAfterEveryEnd(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "post")
	post := "ExecStopPost=/bin/sh -c 'echo \"$$SERVICE_RESULT $$EXIT_CODE $$EXIT_STATUS\" >> " + record + "'\n"
	m := newTestManager(t, map[string]string{
		"a.service":    "[Service]\nExecStart=/bin/sleep 30\n",
		"fail.service": "[Service]\nExecStart=/bin/sh -c 'exit 3'\nExecStopPost=-/bin/false\n" + post,
	})
	// lines waits for the n-th line ExecStopPost wrote.
	lines := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(record)
			out := strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
			if len(out) >= n || time.Now().After(deadline) {
				return out
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Added by a drop-in while the unit runs: a daemon-reload is enough.
	if r := m.Handle(Request{Op: "start", Units: []string{"a"}}); !r.OK {
		t.Fatalf("start: %+v", r)
	}
	dropIn := filepath.Join(m.Paths.Root, "/etc/systemd/system/a.service.d/post.conf")
	if err := os.MkdirAll(filepath.Dir(dropIn), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dropIn, []byte("[Service]\n"+post), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Handle(Request{Op: "daemon-reload"})
	m.Handle(Request{Op: "stop", Units: []string{"a"}})
	if got := lines(1); len(got) != 1 || got[0] != "success killed TERM" {
		t.Fatalf("after a stop, ExecStopPost saw %q, want success killed TERM", got)
	}

	if r := m.Handle(Request{Op: "start", Units: []string{"a"}}); !r.OK {
		t.Fatalf("start: %+v", r)
	}
	if err := syscall.Kill(m.Status("a").MainPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := lines(2); len(got) != 2 || got[1] != "signal killed KILL" {
		t.Fatalf("after a SIGKILL, ExecStopPost saw %q, want signal killed KILL", got)
	}
	// ExecStopPost wrote its line before it exited: the unit stays
	// deactivating until it has (CI on a loaded machine caught it there).
	st := m.Status("a")
	for deadline := time.Now().Add(5 * time.Second); st.ActiveState == "deactivating" && time.Now().Before(deadline); st = m.Status("a") {
		time.Sleep(20 * time.Millisecond)
	}
	if st.ActiveState != "failed" {
		t.Errorf("a SIGKILLed unit without Restart= is %s, want failed", st.ActiveState)
	}

	// A failing ExecStopPost marked "-" does not stop the next one.
	m.Handle(Request{Op: "start", Units: []string{"fail"}})
	if got := lines(3); len(got) != 3 || got[2] != "exit-code exited 3" {
		t.Fatalf("after exit 3, ExecStopPost saw %q, want exit-code exited 3", got)
	}
}
