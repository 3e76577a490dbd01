package initd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// service is the runtime state of one unit. Fields below op are guarded by
// Manager.mu; op serializes start/stop/restart of this unit.
type service struct {
	name string
	op   sync.Mutex

	def           *unitfile.Unit
	active, sub   string
	result        string
	since         time.Time
	mainPID       int
	execMainPID   int
	execMainStart time.Time
	execCode      string
	execStatus    int
	execMain      string
	nRestarts     int
	condFail      string
	run           *runHandle // nil when nothing supervises the unit
	// activated and deactivated are when the unit last started and last
	// ended (what OnUnitActiveSec= and OnUnitInactiveSec= count from);
	// a timer's trigger state is in timer.
	activated, deactivated time.Time
	timer                  *timerState
}

type runHandle struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Restarts back off by doubling while a unit keeps dying within
// quickExit, up to max(RestartSec, maxBackoff).
const (
	quickExit  = 10 * time.Second
	maxBackoff = 10 * time.Second
)

var errCanceled = errors.New("canceled")

// supervise runs the unit until ctx is cancelled or it ends for good,
// restarting it per Restart=. started gets one value: nil once the main
// process runs (or a oneshot finished), else why the start failed; a failure
// is reported only after the unit's state shows it, so systemctl status
// right after a failed start says so.
func (m *Manager) supervise(ctx context.Context, s *service, def *unitfile.Unit, h *runHandle, started chan<- error) {
	var once sync.Once
	notify := func(err error) { once.Do(func() { started <- err }) }
	defer close(h.done)
	defer notify(errCanceled)
	defer m.removeRuntimeDirs(def)

	backoff := def.RestartSec
	for {
		out := m.runOnce(ctx, s, def, notify)
		m.stopPost(s, def, out)
		if out.stopped || ctx.Err() != nil {
			m.finish(s, "inactive", "dead", "success")
			m.logf("%s: stopped", def.Name)
			return
		}
		if !shouldRestart(def.Restart, out.result) {
			if out.result == "success" {
				m.finish(s, "inactive", "dead", out.result)
			} else {
				m.finish(s, "failed", "failed", out.result)
			}
			notify(out.err)
			return
		}
		if out.ranFor > quickExit {
			backoff = def.RestartSec
		}
		delay := backoff
		backoff = min(2*backoff, max(def.RestartSec, maxBackoff))
		m.mu.Lock()
		s.result = out.result
		m.mu.Unlock()
		m.setState(s, "activating", "auto-restart")
		notify(out.err)
		m.logf("%s: scheduling restart in %v", def.Name, delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			m.finish(s, "inactive", "dead", "success")
			m.logf("%s: stopped", def.Name)
			return
		}
		m.mu.Lock()
		s.nRestarts++
		m.mu.Unlock()
	}
}

func shouldRestart(policy, result string) bool {
	switch policy {
	case "always":
		return true
	case "on-success":
		return result == "success"
	case "on-failure":
		return result != "success"
	case "on-abnormal":
		return result == "signal" || result == "core-dump" || result == "timeout"
	case "on-abort":
		return result == "signal" || result == "core-dump"
	}
	return false
}

// outcome is how one activation ended; err says why it never got going.
type outcome struct {
	result  string
	err     error
	ranFor  time.Duration
	stopped bool
}

// runOnce performs one activation: ExecStartPre, the main process (or a
// oneshot's commands), until exit or ctx cancellation. It calls notify(nil)
// once the unit is up.
func (m *Manager) runOnce(ctx context.Context, s *service, def *unitfile.Unit, notify func(error)) outcome {
	env, err := m.unitEnv(def)
	if err == nil {
		err = m.makeRuntimeDirs(def)
	}
	if err != nil {
		m.logf("%s: %v", def.Name, err)
		return outcome{result: "resources", err: err}
	}
	if len(def.ExecStartPre) > 0 {
		m.setState(s, "activating", "start-pre")
	}
	for _, c := range def.ExecStartPre {
		if o, ok := m.runStep(ctx, s, def, c, env, "ExecStartPre"); !ok {
			return o
		}
	}
	if def.Type == "oneshot" {
		m.setState(s, "activating", "start")
		for _, c := range def.ExecStart {
			if o, ok := m.runStep(ctx, s, def, c, env, "ExecStart"); !ok {
				return o
			}
		}
		if !def.RemainAfterExit {
			return outcome{result: "success"}
		}
		m.setState(s, "active", "exited")
		notify(nil)
		<-ctx.Done()
		return outcome{stopped: true}
	}
	if len(def.ExecStart) == 0 {
		err := fmt.Errorf("service has no ExecStart= setting")
		m.logf("%s: %v", def.Name, err)
		return outcome{result: "resources", err: err}
	}
	c := def.ExecStart[0]
	pid, ch, argv, err := m.spawn(def, c, env)
	if err != nil {
		m.logf("%s: failed to execute %s: %v", def.Name, c.Raw, err)
		m.recordExit(s, 0, "exited", 203)
		return outcome{result: "exit-code", err: fmt.Errorf("failed to execute %s: %w", c.Raw, err)}
	}
	start := time.Now()
	m.mu.Lock()
	s.mainPID, s.execMainPID, s.execMainStart = pid, pid, start
	s.execCode, s.execStatus, s.execMain = "", 0, strings.Join(argv, " ")
	m.mu.Unlock()
	m.setState(s, "active", "running")
	m.logf("%s: started, main PID %d", def.Name, pid)
	notify(nil)
	for _, c := range def.ExecStartPost {
		// Failures here only get logged: the main process already runs.
		m.runStep(ctx, s, def, c, env, "ExecStartPost")
	}

	var ws unix.WaitStatus
	select {
	case ws = <-ch:
	case <-ctx.Done():
		m.setState(s, "deactivating", "stop-sigterm")
		code, status := describeWait(m.stopProcess(def, pid, ch))
		m.recordExit(s, pid, code, status)
		return outcome{stopped: true}
	}
	res := exitResult(ws)
	code, status := describeWait(ws)
	m.recordExit(s, pid, code, status)
	m.logf("%s: main process %d exited, code=%s, status=%s", def.Name, pid, code, StatusText(code, status))
	if def.KillMode == "control-group" || def.KillMode == "mixed" || def.KillMode == "" {
		m.killGroupLeftovers(pid, m.stopTimeout(def))
	}
	return outcome{result: res, ranFor: time.Since(start)}
}

// stopPost runs ExecStopPost= after an activation ended, however it ended
// (stopped, exited, killed, failed to start), as systemd does: it is where
// a unit cleans up what its process could not (keepalived's VIP after a
// SIGKILL). Each command gets SERVICE_RESULT, EXIT_CODE and EXIT_STATUS;
// failures are only logged. They are the commands of the unit's files as
// last loaded: after a daemon-reload, the new ones, without a restart, as
// in systemd.
func (m *Manager) stopPost(s *service, def *unitfile.Unit, out outcome) {
	m.mu.Lock()
	if s.def != nil {
		def = s.def
	}
	m.mu.Unlock()
	if len(def.ExecStopPost) == 0 || out.result == "resources" {
		return
	}
	env, err := m.unitEnv(def)
	if err != nil {
		return
	}
	result := out.result
	if out.stopped || result == "" {
		result = "success"
	}
	m.mu.Lock()
	code, status := s.execCode, s.execStatus
	m.mu.Unlock()
	env = append(env, "SERVICE_RESULT="+result)
	if code != "" {
		st := fmt.Sprint(status)
		if code != "exited" {
			st = strings.TrimPrefix(unix.SignalName(syscall.Signal(status)), "SIG")
		}
		env = append(env, "EXIT_CODE="+code, "EXIT_STATUS="+st)
	}
	m.setState(s, "deactivating", "stop-post")
	// Its own deadline: the activation's context is cancelled on a stop.
	ctx, cancel := context.WithTimeout(context.Background(), m.stopTimeout(def))
	defer cancel()
	for _, c := range def.ExecStopPost {
		ws, err := m.runWait(ctx, def, c, env)
		switch {
		case err != nil:
			m.logf("%s: ExecStopPost=%s: %v", def.Name, c.Raw, err)
		case exitResult(ws) != "success" && !c.IgnoreFailure:
			code, status := describeWait(ws)
			m.logf("%s: ExecStopPost=%s failed: code=%s, status=%s", def.Name, c.Raw, code, StatusText(code, status))
		}
	}
}

// runStep runs a control command to completion. ok=false means activation
// must end with the returned outcome.
func (m *Manager) runStep(ctx context.Context, s *service, def *unitfile.Unit, c unitfile.Command, env []string, what string) (outcome, bool) {
	stepCtx, cancel := context.WithTimeout(ctx, startTimeout(def))
	defer cancel()
	ws, err := m.runWait(stepCtx, def, c, env)
	if ctx.Err() != nil {
		return outcome{stopped: true}, false
	}
	if stepCtx.Err() != nil {
		m.logf("%s: %s=%s timed out after %v", def.Name, what, c.Raw, startTimeout(def))
		return outcome{result: "timeout", err: fmt.Errorf("%s timed out", what)}, false
	}
	if err != nil {
		m.logf("%s: %s=%s: %v", def.Name, what, c.Raw, err)
		if c.IgnoreFailure {
			return outcome{}, true
		}
		m.recordExit(s, 0, "exited", 203)
		return outcome{result: "exit-code", err: fmt.Errorf("%s failed: %w", what, err)}, false
	}
	if res := exitResult(ws); res != "success" && !c.IgnoreFailure {
		code, status := describeWait(ws)
		m.logf("%s: %s=%s failed: code=%s, status=%s", def.Name, what, c.Raw, code, StatusText(code, status))
		m.recordExit(s, 0, code, status)
		return outcome{result: res, err: fmt.Errorf("the control process exited with error code (%s=%s: status=%s)",
			what, c.Raw, StatusText(code, status))}, false
	}
	return outcome{}, true
}

// runWait runs a command and waits for it, killing it if ctx ends.
func (m *Manager) runWait(ctx context.Context, def *unitfile.Unit, c unitfile.Command, env []string) (unix.WaitStatus, error) {
	pid, ch, _, err := m.spawn(def, c, env)
	if err != nil {
		return 0, err
	}
	select {
	case ws := <-ch:
		return ws, nil
	case <-ctx.Done():
		return m.stopProcess(def, pid, ch), nil
	}
}

// spawn starts one command of the unit in its own process group, output
// appended to the unit's log, stdin from /dev/null.
func (m *Manager) spawn(def *unitfile.Unit, c unitfile.Command, env []string) (int, <-chan unix.WaitStatus, []string, error) {
	argv := unitfile.ExpandArgs(c.Words, unitfile.EnvMap(env))
	if len(argv) == 0 || (c.ArgvZero && len(argv) < 2) {
		return 0, nil, nil, fmt.Errorf("command line expands to nothing")
	}
	path := argv[0]
	if c.ArgvZero {
		argv = argv[1:]
	}
	path, err := lookPath(path, env)
	if err != nil {
		return 0, nil, nil, err
	}
	logPath := m.Paths.LogFile(def.Name)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, nil, nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, nil, err
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, nil, err
	}
	defer null.Close()
	dir := def.WorkingDirectory
	if dir == "" {
		dir = "/"
	} else if _, err := os.Stat(dir); err != nil && def.WorkingDirOptional {
		dir = "/"
	}
	pid, ch, err := m.reaper.spawn(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []*os.File{null, logf, logf},
		// The main process leads its own group so a stop can signal it and
		// its children at once; anything that calls setsid (static pods)
		// leaves the group and survives, as the kubelet stand-in needs.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	return pid, ch, argv, err
}

// lookPath resolves a relative executable name on the unit's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(unitfile.EnvMap(env)["PATH"]) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable not found in PATH", name)
}

// startTimeout bounds each ExecStartPre/ExecStartPost and oneshot command.
func startTimeout(def *unitfile.Unit) time.Duration {
	if def.TimeoutStartSec > 0 {
		return def.TimeoutStartSec
	}
	return 90 * time.Second
}

func (m *Manager) stopTimeout(def *unitfile.Unit) time.Duration {
	t := def.TimeoutStopSec
	if t <= 0 || t > m.StopTimeoutCap {
		t = m.StopTimeoutCap
	}
	return t
}

// stopProcess delivers KillSignal per KillMode, escalates to SIGKILL after
// the stop timeout, and returns the main process's wait status. Only the
// unit's own process group is ever signalled.
func (m *Manager) stopProcess(def *unitfile.Unit, pid int, ch <-chan unix.WaitStatus) unix.WaitStatus {
	timeout := m.stopTimeout(def)
	group := def.KillMode == "control-group" || def.KillMode == ""
	target := pid
	if group {
		target = -pid
	}
	_ = unix.Kill(target, def.KillSignal)
	_ = unix.Kill(target, unix.SIGCONT)
	var ws unix.WaitStatus
	select {
	case ws = <-ch:
	case <-time.After(timeout):
		m.logf("%s: stop timed out after %v, sending SIGKILL", def.Name, timeout)
		if def.KillMode == "mixed" {
			target = -pid
		}
		_ = unix.Kill(target, unix.SIGKILL)
		select {
		case ws = <-ch:
		case <-time.After(2 * time.Second):
			m.logf("%s: process %d did not die", def.Name, pid)
		}
	}
	if group || def.KillMode == "mixed" {
		m.killGroupLeftovers(pid, timeout)
	}
	return ws
}

// killGroupLeftovers ends what remains of the unit's process group after
// its leader exited: SIGTERM, then SIGKILL once timeout passes.
func (m *Manager) killGroupLeftovers(pgid int, timeout time.Duration) {
	if unix.Kill(-pgid, 0) != nil {
		return
	}
	_ = unix.Kill(-pgid, unix.SIGTERM)
	_ = unix.Kill(-pgid, unix.SIGCONT)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if unix.Kill(-pgid, 0) != nil {
			return
		}
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
}

// unitEnv is what a unit's processes get: a fixed base, Environment=, then
// EnvironmentFile= (which wins, as in systemd).
func (m *Manager) unitEnv(def *unitfile.Unit) ([]string, error) {
	files, err := unitfile.ReadEnvFiles(m.Paths, def.EnvironmentFiles)
	if err != nil {
		return nil, err
	}
	var rt []string
	if len(def.RuntimeDirectory) > 0 {
		dirs := make([]string, len(def.RuntimeDirectory))
		for i, d := range def.RuntimeDirectory {
			dirs[i] = filepath.Join("/run", d)
		}
		rt = []string{"RUNTIME_DIRECTORY=" + strings.Join(dirs, ":")}
	}
	return unitfile.MergeEnv(m.BaseEnv, rt, def.Environment, files), nil
}

func (m *Manager) makeRuntimeDirs(def *unitfile.Unit) error {
	for _, d := range def.RuntimeDirectory {
		p := filepath.Join(m.Paths.RunDir(), d)
		if err := os.MkdirAll(p, def.RuntimeDirectoryMode); err != nil {
			return err
		}
		_ = os.Chmod(p, def.RuntimeDirectoryMode)
	}
	return nil
}

func (m *Manager) removeRuntimeDirs(def *unitfile.Unit) {
	for _, d := range def.RuntimeDirectory {
		_ = os.RemoveAll(filepath.Join(m.Paths.RunDir(), d))
	}
}

func (m *Manager) setState(s *service, active, sub string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.active != active {
		s.since = time.Now()
	}
	s.active, s.sub = active, sub
}

// finish records the end of supervision.
func (m *Manager) finish(s *service, active, sub, result string) {
	m.mu.Lock()
	s.result = result
	s.mainPID = 0
	s.run = nil
	s.deactivated = time.Now()
	m.mu.Unlock()
	m.setState(s, active, sub)
}

func (m *Manager) recordExit(s *service, pid int, code string, status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pid != 0 {
		s.execMainPID = pid
	}
	s.mainPID = 0
	s.execCode, s.execStatus = code, status
}

// exitResult classifies an exit like systemd: 0 and the signals a daemon
// is expected to die of on request count as clean.
func exitResult(ws unix.WaitStatus) string {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return "success"
	case ws.Exited():
		return "exit-code"
	case ws.Signaled():
		switch ws.Signal() {
		case unix.SIGHUP, unix.SIGINT, unix.SIGTERM, unix.SIGPIPE:
			return "success"
		}
		if ws.CoreDump() {
			return "core-dump"
		}
		return "signal"
	}
	return "exit-code"
}

func describeWait(ws unix.WaitStatus) (string, int) {
	switch {
	case ws.Exited():
		return "exited", ws.ExitStatus()
	case ws.Signaled() && ws.CoreDump():
		return "dumped", int(ws.Signal())
	case ws.Signaled():
		return "killed", int(ws.Signal())
	}
	return "exited", 0
}

var exitNames = map[int]string{0: "SUCCESS", 1: "FAILURE", 2: "INVALIDARGUMENT", 3: "NOTIMPLEMENTED",
	4: "NOPERMISSION", 5: "NOTINSTALLED", 6: "NOTCONFIGURED", 7: "NOTRUNNING", 200: "CHDIR", 203: "EXEC"}

// StatusText renders an exit as systemctl status does: "1/FAILURE" for
// code "exited", the signal name ("TERM") for "killed" and "dumped".
func StatusText(code string, status int) string {
	if code == "exited" {
		if n, ok := exitNames[status]; ok {
			return fmt.Sprintf("%d/%s", status, n)
		}
		return fmt.Sprint(status)
	}
	return strings.TrimPrefix(unix.SignalName(syscall.Signal(status)), "SIG")
}
