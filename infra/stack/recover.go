package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"

	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/statebackend"
)

// An up killed outright (a closed laptop, kill -9) leaves the local
// backend's lock behind and its in-flight creates pending. Both would make
// every later up fail until the user found `pulumi cancel` and `pulumi
// refresh --clear-pending-creates`; the provider's resources read their
// live state, so the next up can clear both and converge instead.

// staleLock is a lock of the stack's backend and how to remove it.
type staleLock struct {
	Pid      int
	Hostname string
	remove   func() error
}

// clearStaleLocks removes the backend's locks whose process, on this
// host, is gone. home is the stack's PULUMI_HOME, which tells its
// processes from other stacks' (environment). A lock another machine
// holds is never touched: only that machine can tell its run is gone.
func clearStaleLocks(ctx context.Context, o Options, progress func(string, ...any)) error {
	locks, err := backendLocks(ctx, o)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	home := pulumiHome(o.StateDir)
	for _, lock := range locks {
		if lock.Hostname != host || lock.Pid <= 0 {
			continue
		}
		if err := syscall.Kill(lock.Pid, 0); err != syscall.ESRCH {
			continue
		}
		// The CLI is gone, but a provider it started may live on and
		// still be acting on nodes: a new run must not overlap it.
		// Such a provider exits within a second of its CLI; give it a
		// little longer before calling it stuck.
		orphans := orphanProviders(home)
		for wait := time.Now().Add(10 * time.Second); len(orphans) > 0 && time.Now().Before(wait); orphans = orphanProviders(home) {
			time.Sleep(500 * time.Millisecond)
		}
		if len(orphans) > 0 {
			return fmt.Errorf("the stack's lock belongs to pulumi process %d, which is gone, but its provider (PID %v) still runs, finishing node steps: wait for it to exit (or kill it), then run again", lock.Pid, orphans)
		}
		progress("removing a stale lock of pulumi process %d, which is gone (an interrupted run)\n", lock.Pid)
		if err := lock.remove(); err != nil {
			return err
		}
	}
	return nil
}

// backendLocks lists the locks of the stack's backend: every lock file
// under a file backend's locks, the stack's in an S3 bucket.
func backendLocks(ctx context.Context, o Options) ([]staleLock, error) {
	b := backendOf(o)
	if statebackend.IsS3(b) {
		s3, err := statebackend.ParseS3(b)
		if err != nil {
			return nil, err
		}
		c, _, err := s3.Client(envOf(o), nil)
		if err != nil {
			return nil, err
		}
		locks, err := s3.Locks(ctx, c, program.Project, o.Stack)
		if err != nil {
			return nil, err
		}
		var out []staleLock
		for _, l := range locks {
			out = append(out, staleLock{Pid: l.Pid, Hostname: l.Hostname, remove: func() error { return s3.RemoveLock(ctx, c, l) }})
		}
		return out, nil
	}
	dir, ok := strings.CutPrefix(b, "file://")
	if !ok {
		return nil, nil // another backend keeps its own locks
	}
	var out []staleLock
	root := filepath.Join(dir, ".pulumi", "locks")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		var lock staleLock
		data, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(data, &lock) != nil {
			return nil
		}
		lock.remove = func() error { return os.Remove(p) }
		out = append(out, lock)
		return nil
	})
	return out, err
}

// procInfo is a process's name and parent.
func procInfo(pid int) (comm string, ppid int, ok bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "", 0, false
	}
	st, err := p.Stat()
	if err != nil {
		return "", 0, false
	}
	return st.Comm, st.PPID, true
}

// procs lists this PID namespace's processes.
func procs() procfs.Procs {
	all, _ := procfs.AllProcs()
	return all
}

// orphanProviders lists the homelab provider processes of the stack whose
// PULUMI_HOME is home ("": of any stack) whose pulumi CLI is gone (an up
// killed outright).
// Another stack's provider, on the same machine, is not this one's
// business: its lock is another lock.
func orphanProviders(home string) []int {
	var out []int
	for _, p := range procs() {
		argv, err := p.CmdLine()
		if err != nil || len(argv) == 0 || filepath.Base(argv[0]) != ProviderBinary || !runsFor(p, home) {
			continue
		}
		if _, ppid, ok := procInfo(p.PID); ok {
			if comm, _, ok := procInfo(ppid); !ok || comm != "pulumi" {
				out = append(out, p.PID)
			}
		}
	}
	return out
}

// runsFor says whether process p runs for the stack whose PULUMI_HOME is
// home: the CLI gets it from the workspace (environment) and passes it on
// to the providers it starts. A process whose environment cannot be read
// is counted in, as before stacks were told apart.
func runsFor(p procfs.Proc, home string) bool {
	if home == "" {
		return true
	}
	env, err := p.Environ()
	if err != nil {
		return true
	}
	return slices.Contains(env, "PULUMI_HOME="+home)
}

// pulumiHome is the PULUMI_HOME of the stacks under stateDir.
func pulumiHome(stateDir string) string { return filepath.Join(stateDir, "pulumi-home") }

// SignalCLI sends sig to the pulumi CLI processes this process started
// (the Automation API runs each in its own process group, so a terminal's
// Ctrl-C does not reach them).
func SignalCLI(sig syscall.Signal) int { return signalCLI(sig, "") }

// SignalCLI sends sig to the pulumi CLI processes this process started for
// this stack alone: another stack's run in the same process goes on.
func (s *Stack) SignalCLI(sig syscall.Signal) int { return signalCLI(sig, pulumiHome(s.opts.StateDir)) }

// signalCLI signals this process's pulumi CLIs, those of the stack whose
// PULUMI_HOME is home, or all of them ("").
func signalCLI(sig syscall.Signal, home string) int {
	n := 0
	for _, p := range procs() {
		if comm, ppid, ok := procInfo(p.PID); ok && comm == "pulumi" && ppid == os.Getpid() && (home == "" || runsFor(p, home)) {
			if syscall.Kill(p.PID, sig) == nil {
				n++
			}
		}
	}
	return n
}

// clearPendingOperations refreshes with --clear-pending-creates when the
// last run left operations pending.
func (s *Stack) clearPendingOperations(ctx context.Context) error {
	dep, err := s.s.Export(ctx)
	if err != nil {
		return err
	}
	var d struct {
		PendingOperations []json.RawMessage `json:"pending_operations"`
	}
	if len(dep.Deployment) > 0 {
		if err := json.Unmarshal(dep.Deployment, &d); err != nil {
			return err
		}
	}
	if len(d.PendingOperations) == 0 {
		return nil
	}
	fmt.Fprintf(s.progress, "the last run was interrupted with %d operation(s) in flight: refreshing from the nodes' live state first\n", len(d.PendingOperations))
	_, err = s.s.Refresh(ctx, optrefresh.ClearPendingCreates(), optrefresh.ProgressStreams(s.progress), optrefresh.ErrorProgressStreams(s.progress))
	return err
}
