package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// runsDir holds a detached run per step on the node: its pid while it
// runs, then its exit code and output until this provider collects them.
const runsDir = "/var/lib/homelab/runs"

// busyError is a detached run still going on the node past the bound:
// whatever would change the node under it (a reset, a second run) must
// wait for it.
type busyError struct {
	node, what, dir string
	// after is how long it was waited for.
	after time.Duration
	// pid and cmd are the run's, as the node tells them ("" when not).
	pid, cmd string
}

func (e *busyError) Error() string {
	running := e.what
	if e.cmd != "" {
		running += " (pid " + e.pid + ": " + e.cmd + ")"
	}
	stop := "its process group"
	if e.pid != "" {
		// setsid made the wrapper its group's leader: the group is
		// the run, kubeadm included.
		stop = "kill -- -" + e.pid
	}
	return fmt.Sprintf("%s is busy: %s still runs after %s; nothing more was changed on it. "+
		"Wait for it to end (its exit code and output appear in %s) and run up again; if it is stuck, stop it on the node (%s) and run up again",
		e.node, running, e.after, e.dir, stop)
}

// runDetached runs cmd on the node in its own session, so that neither a
// dropped SSH connection nor a killed `up` kills it half-way (a kubeadm or
// apt run cut short leaves a node that needs a reset). A step already
// running under the same name (an earlier up cut off while waiting for
// it) is waited for instead of started again, and one that finished
// without anyone collecting its result is collected: the same command
// never runs twice at once, and a result is never lost.
//
// The wait ignores cancellation (the user's first Ctrl-C lets running
// node steps finish); the bound still applies.
func runDetached(ctx context.Context, c ssh.Executor, node, name, what string, s scripts.Script) (string, error) {
	cmd := s.String()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), configOf(ctx).detachedBound)
	defer cancel()
	d := runsDir + "/" + name
	sum := sha256.Sum256([]byte(cmd))
	tag := hex.EncodeToString(sum[:8])
	out, err := must(ctx, c, node, what, detachedStart(d, tag, cmd))
	if err != nil {
		return "", err
	}
	switch strings.TrimSpace(out) {
	case "running":
		p.GetLogger(ctx).Warningf("%s: %s is still running from an earlier up; waiting for it", node, what)
	case "finished":
		p.GetLogger(ctx).Infof("%s: %s finished after an earlier up stopped waiting; using its result", node, what)
	}
	return awaitDetached(ctx, c, node, what, d)
}

// detachedArgs are the values of the detached/ scripts.
type detachedArgs struct {
	// Dir is the run's directory under runsDir.
	Dir string
	// Tag names Cmd, a hash of its text (detached/start alone).
	Tag string
	// Cmd is what the run runs, a whole rendered script (detached/start
	// alone): the node's sh runs it with its own name line and header.
	Cmd string
	// Ticks is how many fifths of a second detached/poll waits on the
	// node for the run to end before it answers.
	Ticks int
}

// pollWait is how long one poll waits on the node for a run to end:
// long enough that a kubeadm run costs a few SSH sessions rather than
// one a second, short enough that a bound or a lost run is noticed soon.
const pollWait = 10 * time.Second

// detachedPoll waits up to pollWait on the node for the run in d to end,
// then tells how it stands.
func detachedPoll(d string) scripts.Script {
	return scripts.Render("detached/poll", detachedArgs{Dir: d, Ticks: int(pollWait / (200 * time.Millisecond))})
}

// detachedStart starts cmd, a rendered script's text, detached in d,
// unless a run of it is there.
func detachedStart(d, tag, cmd string) scripts.Script {
	return scripts.Render("detached/start", detachedArgs{Dir: d, Tag: tag, Cmd: cmd})
}

// awaitDetached polls for the run's exit code, then collects (removes) it.
func awaitDetached(ctx context.Context, c ssh.Executor, node, what, d string) (string, error) {
	poll := detachedPoll(d)
	remove := scripts.Render("detached/remove", detachedArgs{Dir: d})
	for lost := 0; ; {
		out, _, err := query(ctx, c, poll)
		if err != nil && ctx.Err() != nil {
			// The bound ran out while the poll waited on the node.
			return "", runningNow(ctx, c, node, what, d)
		}
		if err != nil {
			return "", fmt.Errorf("%s: waiting for %s: %w", node, what, err)
		}
		// The poll waited on the node already; the pause only keeps a
		// node that answers at once from being asked in a tight loop.
		pause := 200 * time.Millisecond
		first, rest, _ := strings.Cut(out, "\n")
		switch {
		case strings.HasPrefix(first, "rc="):
			rc, _ := strconv.Atoi(strings.TrimPrefix(first, "rc="))
			if _, err := c.Run(ctx, remove.String()); err != nil {
				p.GetLogger(ctx).Warningf("%s: removing %s: %v", node, d, err)
			}
			if rc != 0 {
				return "", fmt.Errorf("%s: %s failed (exit %d):\n%s", node, what, rc, tail(redact(rest), 40))
			}
			return rest, nil
		case first == "lost":
			// Its process is gone without an exit code: the node rebooted
			// under it. Give a racing start a moment, then say so.
			if lost++; lost > 3 {
				_, _ = c.Run(ctx, remove.String())
				return "", fmt.Errorf("%s: %s stopped without finishing (the node rebooted?): run up again", node, what)
			}
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return "", runningNow(ctx, c, node, what, d)
		case <-time.After(pause):
		}
	}
}

// runningNow is the busyError of the run in d, with its pid and command
// line as the node tells them. Read under a context of its own: the
// caller's ran out waiting.
func runningNow(ctx context.Context, c ssh.Executor, node, what, d string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	e := &busyError{node: node, what: what, dir: d, after: configOf(ctx).detachedBound}
	out, _, err := query(ctx, c, scripts.Render("detached/process", detachedArgs{Dir: d}))
	if err == nil {
		pid, cmd, _ := strings.Cut(strings.TrimSpace(out), "\n")
		e.pid, e.cmd = strings.TrimSpace(pid), scriptLine(tail(redact(strings.TrimSpace(cmd)), 1))
	}
	return e
}

// scriptLine cuts the command line of a run of a rendered script after
// the script's name: ps shows the whole script on that line, header and
// comments included, and its name is what tells a user what runs.
func scriptLine(cmd string) string {
	before, after, ok := strings.Cut(cmd, scripts.HeaderPrefix)
	if !ok {
		return cmd
	}
	if end := strings.IndexFunc(after, func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || strings.ContainsRune("/-_.", r))
	}); end >= 0 {
		after = after[:end]
	}
	return before + scripts.HeaderPrefix + after
}

// uninterrupted lets a command finish when the user cancels an up:
// killing it half-way leaves a node that needs a reset. A bound still
// applies, so a hung command cannot hold the run forever.
func mustFinish(ctx context.Context, c ssh.Executor, node, what string, cmd scripts.Script) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	return must(ctx, c, node, what, cmd)
}

// The detached runs' names on the node (runDetached).
const (
	initRun = "kubeadm-init"
	joinRun = "kubeadm-join"
	aptRun  = "apt-install"
)

// pendingArgs are detached/pending's values.
type pendingArgs struct{ Dir string }

// settleDetached waits for (or collects) a detached run of name left by an
// earlier up, and says whether there was one.
func settleDetached(ctx context.Context, c ssh.Executor, node, name, what string) (bool, error) {
	d := runsDir + "/" + name
	out, _, err := query(ctx, c, scripts.Render("detached/pending", pendingArgs{Dir: d}))
	if err != nil || strings.TrimSpace(out) != "pending" {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), configOf(ctx).detachedBound)
	defer cancel()
	p.GetLogger(ctx).Warningf("%s: %s from an earlier up is still there; waiting for its outcome", node, what)
	_, err = awaitDetached(ctx, c, node, what, d)
	return true, err
}

// settleBeforeReset is settleDetached for a step that may reset the node
// next: a run still going refuses the step (the node is busy), while one
// that failed or was lost leaves the node for the step to look at. It
// says whether an earlier up's run ended well here.
func settleBeforeReset(ctx context.Context, c ssh.Executor, node, name, what string) (bool, error) {
	found, err := settleDetached(ctx, c, node, name, what)
	var busy *busyError
	if errors.As(err, &busy) {
		return false, err
	}
	if err != nil {
		p.GetLogger(ctx).Warningf("%v", err)
		return false, nil
	}
	return found, nil
}
