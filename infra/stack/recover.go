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
			progress("removing a stale lock of pulumi process %d, which is gone (an interrupted run)\n", lock.Pid)
			return os.Remove(p)
		}
		return nil
	})
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
