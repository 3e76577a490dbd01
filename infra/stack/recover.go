package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// procInfo is a process's name and parent, from /proc/PID/stat.
func procInfo(pid int) (comm string, ppid int, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ...
	s := string(data)
	open, close := strings.Index(s, "("), strings.LastIndex(s, ")")
	if open < 0 || close < open {
		return "", 0, false
	}
	fields := strings.Fields(s[close+1:])
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return s[open+1 : close], ppid, true
}

func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// orphanProviders lists homelab provider processes whose pulumi CLI is
// gone (an up killed outright).
func orphanProviders() []int {
	var out []int
	for _, pid := range pids() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Base(argv0) != ProviderBinary {
			continue
		}
		if _, ppid, ok := procInfo(pid); ok {
			if comm, _, ok := procInfo(ppid); !ok || comm != "pulumi" {
				out = append(out, pid)
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
	for _, pid := range pids() {
		if comm, ppid, ok := procInfo(pid); ok && comm == "pulumi" && ppid == os.Getpid() {
			if syscall.Kill(pid, sig) == nil {
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
