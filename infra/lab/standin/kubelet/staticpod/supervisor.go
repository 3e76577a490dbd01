// Package staticpod runs the static pods of a node (the manifests kubeadm
// writes to /etc/kubernetes/manifests) as plain processes of the node, the
// way the kubelet stand-in of the emulated homelab needs it.
package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
)

// Supervisor keeps one process per manifest in ManifestDir running.
//
// Processes are started in their own session so that they outlive the
// supervisor: kubeadm restarts the kubelet during init, and the control plane
// must not go down with it. A new supervisor re-adopts the processes it finds
// in StateDir instead of starting second copies.
type Supervisor struct {
	ManifestDir string
	StateDir    string
	LogDir      string
	// Env is the base environment of every process; the container's env
	// is added to it.
	Env []string
	// PollInterval is how often ManifestDir is read (default 1 s).
	PollInterval time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL (default 5 s).
	StopGrace time.Duration
	// MaxBackoff caps the restart delay of a crashing process (default 10 s).
	MaxBackoff time.Duration
	// Images, when set, is where a container's binary comes from: its
	// image's directory (a version the store lacks fails to start, as an
	// image that cannot be pulled does). Nil: the pod's PATH.
	Images *images.Store
	Logf   func(format string, args ...any)

	mu      sync.Mutex
	workers map[string]*worker
	// byFile remembers the last good spec of each manifest file, so that a
	// file caught mid-write or broken keeps its pod as it was.
	byFile   map[string]*Spec
	reported map[string]bool
}

func (s *Supervisor) defaults() {
	if s.PollInterval <= 0 {
		s.PollInterval = time.Second
	}
	if s.StopGrace <= 0 {
		s.StopGrace = 5 * time.Second
	}
	if s.MaxBackoff <= 0 {
		s.MaxBackoff = 10 * time.Second
	}
	if s.Logf == nil {
		s.Logf = log.Printf
	}
	if s.StateDir == "" {
		s.StateDir = DefaultStateDir
	}
	s.mu.Lock()
	s.workers = map[string]*worker{}
	s.mu.Unlock()
	s.byFile = map[string]*Spec{}
	s.reported = map[string]bool{}
}

// Run supervises until ctx ends. It leaves the processes running when it
// returns.
func (s *Supervisor) Run(ctx context.Context) error {
	s.defaults()
	for _, d := range []string{s.StateDir, s.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	records, err := LoadRecords(s.StateDir)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	desired := s.scan()
	for _, r := range records {
		s.spawn(ctx, &wg, r.Name, desired[r.Name], &r)
	}
	t := time.NewTicker(s.PollInterval)
	defer t.Stop()
	for {
		s.dispatch(ctx, &wg, desired)
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-t.C:
		}
		desired = s.scan()
	}
}

func (s *Supervisor) dispatch(ctx context.Context, wg *sync.WaitGroup, desired map[string]*Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, w := range s.workers {
		w.set(desired[name])
	}
	for name, spec := range desired {
		if _, ok := s.workers[name]; !ok {
			s.spawnLocked(ctx, wg, name, spec, nil)
		}
	}
}

func (s *Supervisor) spawn(ctx context.Context, wg *sync.WaitGroup, name string, spec *Spec, rec *Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawnLocked(ctx, wg, name, spec, rec)
}

func (s *Supervisor) spawnLocked(ctx context.Context, wg *sync.WaitGroup, name string, spec *Spec, rec *Record) {
	w := &worker{s: s, name: name, want: spec, wake: make(chan struct{}, 1)}
	s.workers[name] = w
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.run(ctx, rec)
	}()
}

// scan reads the manifests: pod name -> spec.
func (s *Supervisor) scan() map[string]*Spec {
	entries, err := os.ReadDir(s.ManifestDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.once("readdir", "static pods: %v", err)
	}
	seen := map[string]bool{}
	out := map[string]*Spec{}
	// Sorted so that the winner among duplicate pod names is stable.
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(s.ManifestDir, e.Name())
		spec := s.load(file)
		if spec == nil {
			continue
		}
		seen[file] = true
		if prev, dup := out[spec.Name]; dup {
			s.once("dup:"+file+spec.Hash, "static pods: %s: pod %q is already defined by %s; ignored", file, spec.Name, prev.Manifest)
			continue
		}
		out[spec.Name] = spec
	}
	for f := range s.byFile {
		if !seen[f] {
			delete(s.byFile, f)
		}
	}
	return out
}

func (s *Supervisor) load(file string) *Spec {
	fi, err := os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	prev := s.byFile[file]
	// A file modified a moment ago may still be being written.
	if time.Since(fi.ModTime()) < 300*time.Millisecond {
		return prev
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return prev
	}
	spec, err := ParseManifest(file, data)
	if err != nil {
		s.once("parse:"+file+err.Error(), "static pods: %v", err)
		return prev
	}
	s.byFile[file] = spec
	return spec
}

// once logs a problem a single time rather than every poll.
func (s *Supervisor) once(key, format string, args ...any) {
	if s.reported[key] {
		return
	}
	s.reported[key] = true
	s.Logf(format, args...)
}

// process is a running static pod: a child of ours, or one adopted from an
// earlier kubelet.
type process struct {
	pid       int
	startTime uint64
	started   time.Time
	done      chan struct{}
	err       error // exit status, children only
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

type worker struct {
	s    *Supervisor
	name string

	mu    sync.Mutex
	want  *Spec
	state PodState
	wake  chan struct{}
}

// PodState is a static pod as the supervisor sees it.
type PodState struct {
	Spec     *Spec // of the manifest in place
	Running  bool  // a process of that manifest runs
	PID      int
	Started  time.Time // of the running process
	Restarts int       // exits since the manifest last changed
	LastExit string
}

// Pods reports the static pods whose manifests are in place.
func (s *Supervisor) Pods() []PodState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PodState
	for _, w := range s.workers {
		w.mu.Lock()
		if w.state.Spec != nil {
			out = append(out, w.state)
		}
		w.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

func (w *worker) set(spec *Spec) {
	w.mu.Lock()
	changed := (w.want == nil) != (spec == nil) || (spec != nil && w.want.Hash != spec.Hash)
	w.want = spec
	w.mu.Unlock()
	if changed {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *worker) desired() *Spec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.want
}

func (w *worker) run(ctx context.Context, rec *Record) {
	s := w.s
	var cur *process
	var curHash string
	if rec != nil {
		if rec.Alive() {
			cur = adopt(ctx, *rec, s.PollInterval/2)
			curHash = rec.Hash
			s.Logf("static pod %s: re-adopted pid %d", w.name, rec.PID)
		} else {
			_ = RemoveRecord(s.StateDir, w.name)
		}
	}
	var failures, restarts int
	var retryAt time.Time
	var lastExit string
	for {
		want := w.desired()
		switch {
		case want == nil && cur != nil:
			s.Logf("static pod %s: manifest removed, stopping pid %d", w.name, cur.pid)
			w.stop(cur)
			cur = nil
			failures, retryAt = 0, time.Time{}
		case cur != nil && curHash != want.Hash:
			s.Logf("static pod %s: manifest changed, restarting pid %d", w.name, cur.pid)
			w.stop(cur)
			cur = nil
			failures, retryAt = 0, time.Time{}
			restarts, lastExit = 0, ""
		}
		if want != nil && cur == nil && !time.Now().Before(retryAt) {
			p, err := w.start(want)
			if err != nil {
				failures++
				d := s.backoff(failures)
				retryAt = time.Now().Add(d)
				s.Logf("static pod %s: %v; retrying in %s", w.name, err, d)
			} else {
				cur, curHash = p, want.Hash
				s.Logf("static pod %s: started pid %d", w.name, p.pid)
			}
		}

		st := PodState{Spec: want, Restarts: restarts, LastExit: lastExit}
		if cur != nil && want != nil && curHash == want.Hash {
			st.Running, st.PID, st.Started = true, cur.pid, cur.started
		}
		w.mu.Lock()
		w.state = st
		w.mu.Unlock()

		var done <-chan struct{}
		var timer *time.Timer
		var retry <-chan time.Time
		if cur != nil {
			done = cur.done
		} else if want != nil {
			timer = time.NewTimer(time.Until(retryAt))
			retry = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-retry:
		case <-done:
			ran := time.Since(cur.started)
			if ran > 2*s.MaxBackoff {
				failures = 0
			}
			failures++
			d := s.backoff(failures)
			retryAt = time.Now().Add(d)
			why := "exited"
			if cur.err != nil {
				why = cur.err.Error()
			}
			s.Logf("static pod %s: pid %d %s after %s; restarting in %s", w.name, cur.pid, why, ran.Round(time.Millisecond), d)
			restarts++
			lastExit = why
			_ = RemoveRecord(s.StateDir, w.name)
			cur = nil
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

func (s *Supervisor) backoff(failures int) time.Duration {
	d := min(time.Second, s.MaxBackoff)
	for i := 1; i < failures && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.MaxBackoff)
}

func (w *worker) stop(p *process) {
	terminate(p.pid, w.s.StopGrace, p.exited)
	_ = RemoveRecord(w.s.StateDir, w.name)
}

func (w *worker) start(spec *Spec) (*process, error) {
	s := w.s
	env := append(append([]string{}, s.Env...), spec.Env...)
	bin, err := s.binary(spec, env)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(s.LogDir, spec.Name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	// The child keeps its own descriptor; ours is only needed until Start.
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s kubelet stand-in: starting %s from %s (sha256 %.12s)\n",
		time.Now().Format(time.RFC3339Nano), spec.Name, spec.Manifest, spec.Hash)
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	cmd := &exec.Cmd{
		Path:        bin,
		Args:        spec.Argv,
		Env:         env,
		Dir:         dir,
		Stdout:      logFile,
		Stderr:      logFile,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "=== start failed: %v\n", err)
		return nil, err
	}
	p := &process{pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	if st, err := readProcStat(p.pid); err == nil {
		p.startTime = st.startTime
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	rec := Record{
		Name:      spec.Name,
		Manifest:  spec.Manifest,
		Hash:      spec.Hash,
		PID:       p.pid,
		StartTime: p.startTime,
		Argv:      spec.Argv,
		Started:   p.started,
	}
	if err := saveRecord(s.StateDir, rec); err != nil {
		s.Logf("static pod %s: cannot record pid %d: %v", spec.Name, p.pid, err)
	}
	return p, nil
}

// adopt watches a process started by an earlier kubelet. It is not our
// child, so /proc is all there is to watch.
func adopt(ctx context.Context, r Record, every time.Duration) *process {
	p := &process{pid: r.PID, startTime: r.StartTime, started: r.Started, done: make(chan struct{})}
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for alive(p.pid, p.startTime) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		close(p.done)
	}()
	return p
}

func envValue(env []string, key string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// binary is the executable the pod's container runs: from its image when
// the supervisor has a store, else from the pod's PATH.
func (s *Supervisor) binary(spec *Spec, env []string) (string, error) {
	if s.Images == nil {
		return lookPath(spec.Argv[0], envValue(env, "PATH"))
	}
	if spec.Image == "" {
		return "", fmt.Errorf("container has no image")
	}
	return s.Images.Binary(spec.Image, spec.Argv[0])
}

// lookPath resolves name against the pod's PATH rather than the kubelet's.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in PATH %q", name, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", p)
	}
	return nil
}
