package initd

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// DefaultPath is the PATH units get, systemd's default for system services.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// opError carries the exit status systemctl should use with its message.
type opError struct {
	code int
	msg  string
}

func (e *opError) Error() string { return e.msg }

func errCode(err error) int {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.code
	}
	return 1
}

// Manager supervises the units of one node.
type Manager struct {
	Paths unitfile.Paths
	// StopTimeoutCap bounds TimeoutStopSec so a stuck unit cannot hold up
	// a lab node for systemd's 90 s.
	StopTimeoutCap time.Duration
	// BaseEnv is the environment every unit starts from.
	BaseEnv []string
	Log     *log.Logger

	reaper *reaper
	// booted is when init started: OnBootSec= counts from it.
	booted time.Time
	mu     sync.Mutex
	units  map[string]*service
	order  []string // first-start order, reversed at shutdown
}

// NewManager returns a Manager whose units get PATH and the HOMELAB_*
// variables of init's own environment (the lab's way to pass settings down
// to the stand-ins).
func NewManager(p unitfile.Paths) *Manager {
	env := []string{"PATH=" + DefaultPath, "LANG=C.UTF-8"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOMELAB_") {
			env = append(env, kv)
		}
	}
	return &Manager{
		Paths:          p,
		StopTimeoutCap: 5 * time.Second,
		BaseEnv:        env,
		Log:            log.New(os.Stderr, "homelab-init: ", log.LstdFlags),
		reaper:         newReaper(),
		booted:         time.Now(),
		units:          map[string]*service{},
	}
}

func (m *Manager) logf(format string, args ...any) { m.Log.Printf(format, args...) }

func (m *Manager) get(name string) *service {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.units[name]
	if s == nil {
		s = &service{name: name, active: "inactive", sub: "dead", result: "success"}
		m.units[name] = s
	}
	return s
}

func (m *Manager) load(verb, name string) (*unitfile.Unit, error) {
	def, err := unitfile.Load(m.Paths, name)
	n := unitfile.Normalize(name)
	if errors.Is(err, unitfile.ErrNotFound) {
		return nil, &opError{5, fmt.Sprintf("Failed to %s %s: Unit %s not found.", verb, n, n)}
	}
	if err != nil {
		return nil, &opError{1, fmt.Sprintf("Failed to %s %s: %v", verb, n, err)}
	}
	if def.Masked {
		return nil, &opError{1, fmt.Sprintf("Failed to %s %s: Unit %s is masked.", verb, n, def.Name)}
	}
	for _, w := range def.Warnings {
		m.logf("%s", w)
	}
	return def, nil
}

// Start starts a unit unless it is already running (or waiting to be
// restarted). With block it waits until the main process runs or the start
// fails.
func (m *Manager) Start(name string, block bool) error {
	def, err := m.load("start", name)
	if err != nil {
		return err
	}
	s := m.get(def.Name)
	s.op.Lock()
	started := m.startLocked(s, def)
	s.op.Unlock()
	return m.awaitStart(def, started, block)
}

// startLocked launches the unit's supervisor. The returned channel reports
// how the start went; it is waited for without holding s.op, so a stop can
// cancel a start stuck in ExecStartPre, as in systemd.
func (m *Manager) startLocked(s *service, def *unitfile.Unit) <-chan error {
	done := make(chan error, 1)
	m.mu.Lock()
	s.def = def
	if s.run != nil {
		m.mu.Unlock()
		done <- nil
		return done
	}
	if c := def.FailedCondition(m.Paths); c != nil {
		cf := fmt.Sprintf("Condition%s=%s", c.Kind, c.Value)
		s.condFail = cf
		m.mu.Unlock()
		m.logf("%s: start skipped, unmet condition %s", def.Name, cf)
		m.setState(s, "inactive", "dead")
		done <- nil
		return done
	}
	s.condFail = ""
	s.nRestarts = 0
	s.result = "success"
	if !contains(m.order, def.Name) {
		m.order = append(m.order, def.Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &runHandle{cancel: cancel, done: make(chan struct{})}
	s.run = h
	s.activated = time.Now()
	m.mu.Unlock()

	if def.Timer != nil {
		go m.runTimer(ctx, s, def, h, done)
		return done
	}
	go m.supervise(ctx, s, def, h, done)
	return done
}

func (m *Manager) awaitStart(def *unitfile.Unit, started <-chan error, block bool) error {
	if !block {
		return nil
	}
	if err := <-started; err != nil {
		return &opError{1, fmt.Sprintf("Job for %s failed: %v.\nSee \"systemctl status %s\" and %s for details.",
			def.Name, err, def.Name, m.Paths.LogFile(def.Name))}
	}
	return nil
}

// Stop stops a unit and waits until its processes are gone.
func (m *Manager) Stop(name string) error {
	n := unitfile.Normalize(name)
	canonical := n
	if def, err := unitfile.Load(m.Paths, name); err == nil {
		canonical = def.Name
	} else {
		m.mu.Lock()
		_, known := m.units[n]
		m.mu.Unlock()
		if !known {
			return &opError{5, fmt.Sprintf("Failed to stop %s: Unit %s not loaded.", n, n)}
		}
	}
	s := m.get(canonical)
	s.op.Lock()
	defer s.op.Unlock()
	m.stopLocked(s)
	return nil
}

func (m *Manager) stopLocked(s *service) {
	m.mu.Lock()
	h := s.run
	m.mu.Unlock()
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

// Restart stops the unit if needed and starts it from freshly read files.
// With onlyIfActive (try-restart) an inactive unit is left alone.
func (m *Manager) Restart(name string, block, onlyIfActive bool) error {
	def, err := m.load("restart", name)
	if err != nil {
		return err
	}
	s := m.get(def.Name)
	s.op.Lock()
	if onlyIfActive {
		m.mu.Lock()
		running := s.run != nil
		m.mu.Unlock()
		if !running {
			s.op.Unlock()
			return nil
		}
	}
	m.stopLocked(s)
	started := m.startLocked(s, def)
	s.op.Unlock()
	return m.awaitStart(def, started, block)
}

// Reload runs ExecReload= (with $MAINPID) or, without it, sends SIGHUP to
// the main process.
func (m *Manager) Reload(name string) error {
	def, err := m.load("reload", name)
	if err != nil {
		return err
	}
	s := m.get(def.Name)
	s.op.Lock()
	defer s.op.Unlock()
	m.mu.Lock()
	pid, active := s.mainPID, s.active
	m.mu.Unlock()
	if active != "active" {
		return &opError{1, fmt.Sprintf("Failed to reload %s: Unit %s is not active.", def.Name, def.Name)}
	}
	if len(def.ExecReload) == 0 {
		if pid == 0 {
			return &opError{1, fmt.Sprintf("Failed to reload %s: no main process.", def.Name)}
		}
		if err := unix.Kill(pid, unix.SIGHUP); err != nil {
			return &opError{1, fmt.Sprintf("Failed to reload %s: %v", def.Name, err)}
		}
		return nil
	}
	env, err := m.unitEnv(def)
	if err != nil {
		return &opError{1, fmt.Sprintf("Failed to reload %s: %v", def.Name, err)}
	}
	env = unitfile.MergeEnv(env, []string{"MAINPID=" + strconv.Itoa(pid)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range def.ExecReload {
		ws, err := m.runWait(ctx, def, c, env)
		if c.IgnoreFailure {
			continue
		}
		if err == nil && exitResult(ws) != "success" {
			code, status := describeWait(ws)
			err = fmt.Errorf("ExecReload=%s: status=%s", c.Raw, StatusText(code, status))
		}
		if err != nil {
			return &opError{1, fmt.Sprintf("Job for %s failed: %v.", def.Name, err)}
		}
	}
	return nil
}

// ResetFailed turns a failed unit back into an inactive one.
func (m *Manager) ResetFailed(name string) {
	def, err := unitfile.Load(m.Paths, name)
	n := unitfile.Normalize(name)
	if err == nil {
		n = def.Name
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.units[n]; s != nil && s.run == nil && s.active == "failed" {
		s.active, s.sub, s.result, s.nRestarts = "inactive", "dead", "success", 0
	}
}

// DaemonReload re-reads the files of every unit init knows. Start and
// restart always read the files afresh, so this only refreshes what status
// shows, like systemd's reload does for a running unit.
func (m *Manager) DaemonReload() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, s := range m.units {
		if def, err := unitfile.Load(m.Paths, n); err == nil {
			s.def = def
		}
	}
}

// Status describes a unit, loading its files afresh.
func (m *Manager) Status(name string) UnitStatus {
	n := unitfile.Normalize(name)
	def, err := unitfile.Load(m.Paths, name)
	st := UnitStatus{Name: n, LoadState: "loaded", ActiveState: "inactive", SubState: "dead", Result: "success"}
	switch {
	case errors.Is(err, unitfile.ErrNotFound):
		st.LoadState = "not-found"
	case err != nil:
		st.LoadState, st.LoadError = "bad-setting", err.Error()
	case def.Masked:
		st.Name, st.LoadState, st.FragmentPath = def.Name, "masked", def.FragmentPath
	default:
		st.Name = def.Name
		st.Names = def.Names
		st.Description = def.Description
		st.Documentation = def.Documentation
		st.FragmentPath = def.FragmentPath
		st.DropIns = def.DropIns
		st.Restart = def.Restart
		if def.Timer != nil {
			st.Triggers = def.Timer.Unit
		}
	}
	st.UnitFileState, _ = unitfile.IsEnabled(m.Paths, st.Name)
	st.LogFile = m.Paths.LogFile(st.Name)

	m.mu.Lock()
	s := m.units[st.Name]
	if s != nil {
		if st.LoadState == "not-found" && s.def != nil {
			// Running from a unit file deleted since: still there.
			st.LoadState, st.Description, st.FragmentPath = "loaded", s.def.Description, s.def.FragmentPath
		}
		st.ActiveState, st.SubState, st.Result = s.active, s.sub, s.result
		if !s.since.IsZero() {
			st.Since = s.since.Format(time.RFC3339Nano)
		}
		st.MainPID, st.ExecMainPID = s.mainPID, s.execMainPID
		if !s.execMainStart.IsZero() {
			st.ExecMainStart = s.execMainStart.Format(time.RFC3339Nano)
		}
		st.ExecMainCode, st.ExecMainStat, st.ExecMain = s.execCode, s.execStatus, s.execMain
		st.NRestarts, st.ConditionFail = s.nRestarts, s.condFail
		if t := s.timer; t != nil {
			if !t.next.IsZero() {
				st.NextElapse = t.next.Format(time.RFC3339Nano)
			}
			if !t.last.IsZero() {
				st.LastTrigger = t.last.Format(time.RFC3339Nano)
			}
		}
	}
	m.mu.Unlock()
	if st.MainPID != 0 {
		st.Processes = groupProcs(st.MainPID)
	}
	return st
}

// List describes every unit init has seen, plus those enabled for boot.
func (m *Manager) List() []UnitStatus {
	m.mu.Lock()
	names := make([]string, 0, len(m.units))
	for n := range m.units {
		names = append(names, n)
	}
	m.mu.Unlock()
	for _, n := range unitfile.BootUnits(m.Paths) {
		if !contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]UnitStatus, 0, len(names))
	for _, n := range names {
		out = append(out, m.Status(n))
	}
	return out
}

// Boot starts every unit enabled for multi-user.target, in name order,
// without waiting for any of them.
func (m *Manager) Boot() {
	for _, n := range unitfile.BootUnits(m.Paths) {
		if err := m.Start(n, false); err != nil {
			m.logf("boot: %v", err)
		}
	}
}

// Shutdown stops every unit, last started first.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	order := append([]string(nil), m.order...)
	m.mu.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		s := m.get(order[i])
		s.op.Lock()
		m.stopLocked(s)
		s.op.Unlock()
	}
}

// groupProcs lists the processes in a unit's process group.
func groupProcs(pgid int) []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised comm: state ppid pgrp ...
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, Proc{PID: pid, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
