package staticpod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
)

type lab struct {
	t        *testing.T
	manifest string
	state    string
	logs     string
	dir      string
	// image is the manifests' image ("x" when empty); store, when set,
	// is where the supervisor takes binaries from.
	image string
	store *images.Store
}

func newLab(t *testing.T) *lab {
	d := t.TempDir()
	l := &lab{t: t, dir: d, manifest: filepath.Join(d, "manifests"), state: filepath.Join(d, "state"), logs: filepath.Join(d, "logs")}
	if err := os.MkdirAll(l.manifest, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		recs, _ := LoadRecords(l.state)
		for _, r := range recs {
			r.Stop(time.Second)
		}
	})
	return l
}

// supervise runs a supervisor until the returned stop func is called.
func (l *lab) supervise() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		ManifestDir:  l.manifest,
		StateDir:     l.state,
		LogDir:       l.logs,
		Env:          []string{"PATH=/usr/bin:/bin"},
		PollInterval: 100 * time.Millisecond,
		StopGrace:    2 * time.Second,
		MaxBackoff:   400 * time.Millisecond,
		Images:       l.store,
		Logf:         l.t.Logf,
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Run(ctx); err != nil {
			l.t.Error(err)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// write puts a pod manifest in place with an old mtime, so the supervisor
// does not wait for it to settle.
func (l *lab) write(name string, command ...string) {
	var b strings.Builder
	image := l.image
	if image == "" {
		image = "x"
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\nspec:\n  containers:\n  - name: c\n    image: %s\n    command:\n", name, image)
	for _, c := range command {
		fmt.Fprintf(&b, "    - %q\n", c)
	}
	b.WriteString("    env:\n    - name: POD\n      value: " + name + "\n")
	p := filepath.Join(l.manifest, name+".yaml")
	tmp := filepath.Join(l.manifest, ".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		l.t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(tmp, old, old); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) record(name string) (Record, bool) {
	recs, _ := LoadRecords(l.state)
	for _, r := range recs {
		if r.Name == name {
			return r, true
		}
	}
	return Record{}, false
}

// waitRecord waits for a record of name that satisfies ok.
func (l *lab) waitRecord(name string, ok func(Record) bool) Record {
	l.t.Helper()
	var r Record
	if !waitFor(func() bool {
		var found bool
		r, found = l.record(name)
		return found && r.Alive() && ok(r)
	}, 10*time.Second) {
		l.t.Fatalf("no live record of %s satisfying the condition (last %+v)", name, r)
	}
	return r
}

func anyRecord(Record) bool { return true }

func TestStartAndReadopt(t *testing.T) {
	l := newLab(t)
	l.write("sleeper", "sleep", "1001")
	stop := l.supervise()
	r := l.waitRecord("sleeper", anyRecord)
	if r.Argv[0] != "sleep" || r.Argv[1] != "1001" {
		t.Fatalf("argv %q", r.Argv)
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.PID))
	if !strings.Contains(string(env), "POD=sleeper\x00") {
		t.Errorf("env %q lacks POD", env)
	}
	if st, _ := readProcStat(r.PID); st.pgid != r.PID {
		t.Errorf("pgid %d, want own group %d", st.pgid, r.PID)
	}
	stop()
	if !r.Alive() {
		t.Fatal("process did not survive the supervisor")
	}

	stop = l.supervise()
	defer stop()
	time.Sleep(700 * time.Millisecond)
	r2 := l.waitRecord("sleeper", anyRecord)
	if r2.PID != r.PID {
		t.Fatalf("started pid %d instead of re-adopting %d", r2.PID, r.PID)
	}
	if n := countProcs([]string{"sleep", "1001"}); n != 1 {
		t.Fatalf("%d copies running", n)
	}
	log, _ := os.ReadFile(filepath.Join(l.logs, "sleeper.log"))
	if strings.Count(string(log), "starting sleeper") != 1 {
		t.Errorf("log:\n%s", log)
	}

	// An adopted process that dies is restarted too.
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	l.waitRecord("sleeper", func(x Record) bool { return x.PID != r.PID })
}

func TestNoAdoptionOfReusedPID(t *testing.T) {
	l := newLab(t)
	l.write("sleeper", "sleep", "1002")
	spec, err := ParseManifest("", mustRead(t, filepath.Join(l.manifest, "sleeper.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	// Our own PID is alive but runs something else.
	fake := Record{Name: "sleeper", Hash: spec.Hash, PID: os.Getpid(), Argv: spec.Argv}
	if err := saveRecord(l.state, fake); err != nil {
		t.Fatal(err)
	}
	if fake.Alive() {
		t.Fatal("record with a foreign command line counts as alive")
	}
	stop := l.supervise()
	defer stop()
	r := l.waitRecord("sleeper", anyRecord)
	if r.PID == os.Getpid() {
		t.Fatal("adopted a process that is not ours")
	}
}

func TestRestartOnExit(t *testing.T) {
	l := newLab(t)
	runs := filepath.Join(l.dir, "runs")
	l.write("crasher", "sh", "-c", "echo run >> "+runs+"; exit 3")
	stop := l.supervise()
	defer stop()
	if !waitFor(func() bool { b, _ := os.ReadFile(runs); return strings.Count(string(b), "run") >= 3 }, 10*time.Second) {
		t.Fatal("crashing pod was not restarted")
	}
}

func TestStopOnRemovalAndRestartOnChange(t *testing.T) {
	l := newLab(t)
	l.write("a", "sleep", "1003")
	// A pod whose manifest vanished while no kubelet ran is stopped too.
	l.write("orphan", "sleep", "1004")
	stop := l.supervise()
	orphan := l.waitRecord("orphan", anyRecord)
	stop()
	if err := os.Remove(filepath.Join(l.manifest, "orphan.yaml")); err != nil {
		t.Fatal(err)
	}

	stop = l.supervise()
	defer stop()
	if !waitFor(func() bool { return !orphan.Alive() }, 10*time.Second) {
		t.Fatal("orphan pod kept running")
	}
	a := l.waitRecord("a", anyRecord)

	l.write("a", "sleep", "1005")
	a2 := l.waitRecord("a", func(r Record) bool { return r.Argv[1] == "1005" })
	if a.Alive() || a2.PID == a.PID {
		t.Fatal("old process still running after manifest change")
	}

	if err := os.Remove(filepath.Join(l.manifest, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return !a2.Alive() }, 10*time.Second) {
		t.Fatal("pod kept running after its manifest was removed")
	}
	if !waitFor(func() bool { _, ok := l.record("a"); return !ok }, 5*time.Second) {
		t.Fatal("record left behind")
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	l := newLab(t)
	l.write("stubborn", "sh", "-c", "trap '' TERM; sleep 1006 & wait")
	stop := l.supervise()
	defer stop()
	r := l.waitRecord("stubborn", anyRecord)
	// Let the shell install its trap.
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := os.Remove(filepath.Join(l.manifest, "stubborn.yaml")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return !r.Alive() }, 10*time.Second) {
		t.Fatal("not killed")
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("killed after %s, before the grace period", d)
	}
	// The whole group goes, grandchildren included.
	if !waitFor(func() bool { return countProcs([]string{"sleep", "1006"}) == 0 }, 5*time.Second) {
		t.Fatal("grandchild survived")
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func countProcs(argv []string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if st, err := readProcStat(pid); err != nil || st.state == 'Z' {
			continue
		}
		got, _ := readCmdline(pid)
		if strings.Join(got, "\x00") == strings.Join(argv, "\x00") {
			n++
		}
	}
	return n
}

// With an image store, a pod runs its image's binary, not the PATH's: a
// manifest moved to another version runs that version, and one naming a
// version the store lacks runs nothing (the old version is stopped, as the
// kubelet stops a pod whose manifest changed) until the image is there.
func TestPodsRunTheirImagesBinary(t *testing.T) {
	l := newLab(t)
	l.store = &images.Store{Dir: filepath.Join(l.dir, "images")}
	addVersion := func(v string) {
		t.Helper()
		src := filepath.Join(l.dir, "app-"+v)
		if err := os.WriteFile(src, []byte("#!/bin/sh\nexec sleep 100"+strings.TrimPrefix(v, "v")+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := images.Add(l.store.Dir, "registry.k8s.io/app:"+v, map[string]string{"app": src}, os.Link); err != nil {
			t.Fatal(err)
		}
	}
	addVersion("v1")
	// On the PATH, app would not be found at all.
	l.image = "registry.k8s.io/app:v1"
	l.write("app", "app", "--flag")
	stop := l.supervise()
	defer stop()
	sleeping := func(arg string) bool { return countProcs([]string{"sleep", arg}) == 1 }
	if !waitFor(func() bool { return sleeping("1001") }, 10*time.Second) {
		t.Fatal("the v1 image's binary is not running")
	}

	l.image = "registry.k8s.io/app:v2"
	l.write("app", "app", "--flag")
	if !waitFor(func() bool { return !sleeping("1001") }, 10*time.Second) {
		t.Fatal("v1 kept running after its manifest moved to v2")
	}
	time.Sleep(time.Second)
	if r, ok := l.record("app"); ok && r.Alive() {
		t.Fatalf("a pod runs although the store has no v2 image: %+v", r)
	}

	addVersion("v2")
	if !waitFor(func() bool { return sleeping("1002") }, 10*time.Second) {
		t.Fatal("the v2 image's binary did not start once the image was there")
	}
}
