// Package clusterlock is the lock on the cluster itself: a run that
// changes the cluster (up, etcd restore, adopt, destroy) holds it, so two
// operators, or one operator with two state directories, never change the
// nodes at once. Pulumi's own lock guards one state backend only; this
// one lives on the machines.
//
// The lock is a directory on the control-plane nodes, taken on a majority
// of them one at a time in the inventory's order: two runs can never both
// hold a majority, one node down does not stop a three-node control
// plane, and a single-node control plane is its own majority. The holder
// record (who, where, what, since when) is what a refused run names.
package clusterlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Dir is the lock on a node.
const Dir = nodefacts.ClusterLockDir

// takeArgs and releaseArgs are what the lock's scripts are given.
type takeArgs struct {
	Dir, ID string
	Break   bool
}

type releaseArgs struct{ Dir, ID string }

// Holder is who holds the lock, as the refused run is told.
type Holder struct {
	// ID is the run's own random identity: what releases only its lock.
	ID   string `json:"id"`
	User string `json:"user"`
	Host string `json:"host"`
	// Machine is /etc/machine-id: homelab machines often share a host
	// name (ubuntu, localhost), and a pid means something only on the
	// machine it ran on.
	Machine string    `json:"machine,omitempty"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// Me is this process as a holder, running command (as the user typed it,
// with no secrets: a command line never holds one here).
func Me(command string) Holder {
	h := Holder{PID: os.Getpid(), Command: command, Since: time.Now().UTC().Truncate(time.Second)}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	h.ID = hex.EncodeToString(id)
	if u, err := user.Current(); err == nil {
		h.User = u.Username
	}
	h.Host, _ = os.Hostname()
	h.Machine = machineID()
	return h
}

func (h Holder) String() string {
	if h.ID == "" {
		return "a run that has not written its record yet"
	}
	return fmt.Sprintf("%s@%s (pid %d, %q, since %s)", h.User, h.Host, h.PID, h.Command, h.Since.Format(time.RFC3339))
}

// Node is a control-plane node as the lock reaches it: Exec nil (with
// Err) when it could not be reached.
type Node struct {
	Name string
	Exec ssh.Executor
	Err  error
}

// HeldError is the lock held by another run.
type HeldError struct {
	Node   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the cluster is locked by another run: %s holds it (on %s, %s). "+
		"Wait for that run to end; if it is gone (killed, its machine lost), pass --break-lock to take the lock from it",
		e.Holder, e.Node, Dir)
}

// Lock is the lock as this run holds it.
type Lock struct{ me Holder }

// Options are how a run takes the lock.
type Options struct {
	// Break replaces another run's lock, saying so through Warn.
	Break bool
	Warn  func(string)
	// Reachable makes the reachable nodes enough (at least one) instead
	// of a majority: for etcd restore, which runs exactly when most
	// control-plane nodes may be lost. Two such runs still meet on the
	// first node both reach.
	Reachable bool
}

// Take takes the lock for me on a majority of nodes (the control-plane
// nodes, in the inventory's order), or none: another run's lock refuses
// with a HeldError naming it, unless o.Break.
func Take(ctx context.Context, nodes []Node, me Holder, o Options) (*Lock, error) {
	record, err := json.Marshal(me)
	if err != nil {
		return nil, err
	}
	need := len(nodes)/2 + 1
	if o.Reachable {
		need = 1
	}
	take := scripts.Render("clusterlock/take", takeArgs{Dir: Dir, ID: me.ID, Break: o.Break})
	l := &Lock{me: me}
	var took []Node
	var unreached *multierror.Error
	for _, n := range nodes {
		if n.Exec == nil {
			unreached = multierror.Append(unreached, fmt.Errorf("%s: %w", n.Name, n.Err))
			continue
		}
		res, err := n.Exec.RunInput(ctx, take.String(), record)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			unreached = multierror.Append(unreached, fmt.Errorf("%s: taking the cluster lock: %w", n.Name, err))
			continue
		}
		verdict, rest, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), "\n")
		switch verdict {
		case "taken", "ours":
		case "broken":
			if o.Warn != nil {
				o.Warn(fmt.Sprintf("%s: broke the cluster lock of %s (--break-lock)", n.Name, parseHolder(rest)))
			}
		case "held":
			l.Release(ctx, took)
			return nil, &HeldError{Node: n.Name, Holder: parseHolder(rest)}
		default:
			l.Release(ctx, took)
			return nil, fmt.Errorf("%s: taking the cluster lock: unexpected answer %q", n.Name, res.Stdout)
		}
		took = append(took, n)
	}
	if len(took) < need {
		l.Release(ctx, took)
		return nil, fmt.Errorf("the cluster lock needs %d of the %d control-plane nodes; only %d could take it: %w",
			need, len(nodes), len(took), unreached.ErrorOrNil())
	}
	return l, nil
}

// Release gives the lock back on nodes, even when ctx is cancelled (a
// Ctrl-C must not leave the cluster locked). The nodes are connected
// afresh by the caller, since a long run may outlive its first
// connections; a node where another run holds the lock (it broke ours)
// keeps it, and unreachable nodes are skipped, their lock named.
func (l *Lock) Release(ctx context.Context, nodes []Node) error {
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs *multierror.Error
	for _, n := range nodes {
		if n.Exec == nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: releasing the cluster lock (remove %s there once no run holds it): %w", n.Name, Dir, n.Err))
			continue
		}
		res, err := n.Exec.Run(ctx, scripts.Render("clusterlock/release", releaseArgs{Dir: Dir, ID: l.me.ID}).String())
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: releasing the cluster lock (remove %s there once no run holds it): %w", n.Name, Dir, err))
		}
	}
	return errs.ErrorOrNil()
}

func parseHolder(s string) Holder {
	var h Holder
	_ = json.Unmarshal([]byte(strings.TrimSpace(s)), &h)
	return h
}

// Target is the cluster whose control-plane nodes hold the lock.
type Target struct {
	Inventory  *inventory.Inventory
	PrivateKey []byte
	KnownHosts string
	// Dial opens SSH transport connections; default a plain TCP dial from
	// this process's namespace.
	Dial ssh.DialFunc
	// CommandLog, when set, receives every command run on a node.
	CommandLog string
}

// Connect dials the control-plane nodes at once, in the inventory's
// order; an unreachable one comes back with its error. Close closes them.
func Connect(ctx context.Context, t Target) []Node {
	inv := t.Inventory // loaded, so its SSH port and user are set
	opts := []ssh.Option{ssh.WithCommandLog(t.CommandLog), ssh.WithRetry(3 * time.Second), ssh.WithTimeout(10 * time.Second)}
	if t.Dial != nil {
		opts = append(opts, ssh.WithDialer(t.Dial))
	}
	cps := inv.ControlPlanes()
	nodes := make([]Node, len(cps))
	var wg sync.WaitGroup
	for i, n := range cps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: n.Address, Port: inv.SSH.Port, User: inv.SSH.User, PrivateKey: t.PrivateKey, KnownHosts: t.KnownHosts}, opts...)
			nodes[i] = Node{Name: n.Name, Err: err}
			if err == nil {
				nodes[i].Exec = c
			}
		}()
	}
	wg.Wait()
	return nodes
}

// Close closes the connections Connect opened.
func Close(nodes []Node) {
	for _, n := range nodes {
		if c, ok := n.Exec.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// GoneHere reports whether h is a run on this machine (by machine ID, not
// host name) that no longer runs: its process is gone, or its pid now
// belongs to a program other than homelab. Such a lock (a run killed with SIGKILL, a closed
// terminal) can be taken over without asking; one from another machine
// cannot be checked from here.
func (h Holder) GoneHere() bool {
	if h.Machine == "" || h.Machine != machineID() || h.PID <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", h.PID))
	if err != nil {
		return os.IsNotExist(err)
	}
	return !strings.Contains(string(cmdline), "homelab")
}

// machineID is this machine's systemd machine ID ("" where there is none:
// then no holder is ever known gone from here).
func machineID() string {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
