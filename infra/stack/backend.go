package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/statebackend"
)

// backendOf is the state backend a stack opened with o uses: --state,
// else PULUMI_BACKEND_URL (o.Env's, then this process's), else a file
// backend under the state directory.
func backendOf(o Options) string {
	for _, b := range []string{o.Backend, o.Env["PULUMI_BACKEND_URL"], processEnv("PULUMI_BACKEND_URL")} {
		if b != "" {
			return b
		}
	}
	return "file://" + filepath.Join(o.StateDir, "backend")
}

// envOf looks up the engine's environment: o.Env over this process's.
func envOf(o Options) statebackend.Env {
	return func(k string) string {
		if v, ok := o.Env[k]; ok {
			return v
		}
		return processEnv(k)
	}
}

// stackPresence tells whether the backend already holds the stack, and
// where that was seen.
type stackPresence struct {
	found bool
	where string
}

// checkBackend reaches the backend before anything else is done: an S3
// bucket that is unreachable or refuses the credentials stops the command
// here, named, with no node touched and no bundle created; and it says
// whether the stack is already there.
func checkBackend(ctx context.Context, o Options) (stackPresence, error) {
	b := backendOf(o)
	if dir, ok := strings.CutPrefix(b, "file://"); ok {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(statebackend.StackFile(program.Project, o.Stack))))
		return stackPresence{found: err == nil && statebackend.Resources(data) > 0, where: b}, nil
	}
	if !statebackend.IsS3(b) {
		return stackPresence{}, nil // Pulumi Cloud and the others: the CLI checks them
	}
	s3, err := statebackend.ParseS3(b)
	if err != nil {
		return stackPresence{}, err
	}
	c, err := s3.Check(ctx, envOf(o), nil)
	if err != nil {
		return stackPresence{}, err
	}
	found, err := s3.HasStack(ctx, c, program.Project, o.Stack)
	return stackPresence{found: found, where: s3.URL}, err
}

// lockedMarker is how Pulumi's self-managed backend refuses a stack
// another run holds (pulumi/pkg/backend/diy lock.go).
const lockedMarker = "the stack is currently locked by"

// explainLock turns Pulumi's refusal of a locked stack into one that says
// who may hold it here: the refusal lists each holder as user@host (pid).
func explainLock(err error) error {
	if err == nil || !strings.Contains(err.Error(), lockedMarker) {
		return err
	}
	return fmt.Errorf("another run holds this stack's state (Pulumi's lock, named below with its user@host and pid: "+
		"an up, refresh or destroy from this or another machine sharing the backend): wait for it to end; "+
		"only if that run is gone for good, remove its lock with `pulumi cancel`: %w", err)
}
