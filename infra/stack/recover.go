package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
)

// An up killed outright (a closed laptop, kill -9) leaves the local
// backend's lock behind and its in-flight creates pending. Both would make
// every later up fail until the user found `pulumi cancel` and `pulumi
// refresh --clear-pending-creates`; the provider's resources read their
// live state, so the next up can clear both and converge instead.

// clearStaleLocks removes lock files of the local backend whose process,
// on this host, is gone.
func clearStaleLocks(backendURL string, progress func(string, ...any)) error {
	dir, ok := strings.CutPrefix(backendURL, "file://")
	if !ok {
		return nil // another backend keeps its own locks
	}
	host, _ := os.Hostname()
	root := filepath.Join(dir, ".pulumi", "locks")
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		var lock struct {
			Pid      int    `json:"pid"`
			Hostname string `json:"hostname"`
		}
		data, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(data, &lock) != nil || lock.Hostname != host || lock.Pid <= 0 {
			return nil
		}
		if err := syscall.Kill(lock.Pid, 0); err == syscall.ESRCH {
			// The CLI is gone, but a provider it started may live on and
			// still be acting on nodes: a new run must not overlap it.
			// Such a provider exits within a second of its CLI; give it a
			// little longer before calling it stuck.
			orphans := orphanProviders()
			for wait := time.Now().Add(10 * time.Second); len(orphans) > 0 && time.Now().Before(wait); orphans = orphanProviders() {
				time.Sleep(500 * time.Millisecond)
			}
			if len(orphans) > 0 {
				return fmt.Errorf("the stack's lock belongs to pulumi process %d, which is gone, but its provider (PID %v) still runs, finishing node steps: wait for it to exit (or kill it), then run again", lock.Pid, orphans)
			}
			progress("removing a stale lock of pulumi process %d, which is gone (an interrupted run)\n", lock.Pid)
			return os.Remove(p)
		}
		return nil
	})
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

// orphanProviders lists homelab provider processes whose pulumi CLI is
// gone (an up killed outright).
func orphanProviders() []int {
	var out []int
	for _, p := range procs() {
		argv, err := p.CmdLine()
		if err != nil || len(argv) == 0 || filepath.Base(argv[0]) != ProviderBinary {
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

// SignalCLI sends sig to the pulumi CLI processes this process started
// (the Automation API runs each in its own process group, so a terminal's
// Ctrl-C does not reach them).
func SignalCLI(sig syscall.Signal) int {
	n := 0
	for _, p := range procs() {
		if comm, ppid, ok := procInfo(p.PID); ok && comm == "pulumi" && ppid == os.Getpid() {
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
