package clusterlock

import (
	"context"
	"errors"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// localNode runs the lock's commands in a real sh on this machine, with
// the lock in its own directory instead of Dir.
type localNode struct {
	ssh.Executor // unused methods panic
	dir          string
}

func (n localNode) RunInput(ctx context.Context, cmd string, stdin []byte) (ssh.Result, error) {
	c := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, Dir, n.dir))
	c.Stdin = strings.NewReader(string(stdin))
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return ssh.Result{Stdout: []byte(out.String()), Stderr: []byte(errb.String()), ExitCode: exit.ExitCode()}, nil
	}
	return ssh.Result{Stdout: []byte(out.String()), Stderr: []byte(errb.String())}, err
}

func (n localNode) Run(ctx context.Context, cmd string) (ssh.Result, error) {
	return n.RunInput(ctx, cmd, nil)
}

func controlPlane(t *testing.T, names ...string) []Node {
	root := t.TempDir()
	var nodes []Node
	for _, name := range names {
		nodes = append(nodes, Node{Name: name, Exec: localNode{dir: filepath.Join(root, name, "var/lib/homelab/cluster.lock")}})
	}
	return nodes
}

func held(n Node) string {
	b, _ := os.ReadFile(filepath.Join(n.Exec.(localNode).dir, "holder.json"))
	return string(b)
}

func run(cmd string) Holder {
	h := Me(cmd)
	h.User, h.Host = "alice", "laptop"
	return h
}

// A second run is refused naming the first, takes nothing, and leaves the
// first's lock whole; once the first releases, the second takes it.
func TestASecondRunIsRefusedNamingTheFirst(t *testing.T) {
	ctx := context.Background()
	nodes := controlPlane(t, "cp-1", "cp-2", "cp-3")
	first, second := run("homelab up -f lab.yaml --state-dir a"), run("homelab up -f lab.yaml --state-dir b")
	l, err := Take(ctx, nodes, first, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Take(ctx, nodes, second, Options{})
	var heldErr *HeldError
	if !errors.As(err, &heldErr) {
		t.Fatalf("a second run: %v", err)
	}
	for _, want := range []string{"alice@laptop", "--state-dir a", "--break-lock", "cp-1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	for _, n := range nodes {
		if !strings.Contains(held(n), first.ID) {
			t.Errorf("%s: the first run's lock is gone: %q", n.Name, held(n))
		}
	}
	// Taking again in the same run is no conflict.
	if _, err := Take(ctx, nodes, first, Options{}); err != nil {
		t.Errorf("the holder taking it again: %v", err)
	}
	if err := l.Release(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if held(n) != "" {
			t.Errorf("%s: still locked after release: %q", n.Name, held(n))
		}
	}
	if _, err := Take(ctx, nodes, second, Options{}); err != nil {
		t.Errorf("after the release: %v", err)
	}
}

// Runs racing for the lock: exactly one wins, every time.
func TestRacingRunsOneWins(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		nodes := controlPlane(t, "cp-1", "cp-2", "cp-3")
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := Take(ctx, nodes, run("homelab up"), Options{}); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d runs took the lock", round, won)
		}
	}
}

// One control-plane node of three down still leaves a majority; two down
// do not, and then nothing stays locked.
func TestTheLockNeedsAMajority(t *testing.T) {
	ctx := context.Background()
	nodes := controlPlane(t, "cp-1", "cp-2", "cp-3")
	down := errors.New("no route to host")
	nodes[1] = Node{Name: "cp-2", Err: down}
	l, err := Take(ctx, nodes, run("homelab up"), Options{})
	if err != nil {
		t.Fatalf("one node down: %v", err)
	}
	l.Release(ctx, nodes)
	nodes[2] = Node{Name: "cp-3", Err: down}
	_, err = Take(ctx, nodes, run("homelab up"), Options{})
	if err == nil || !strings.Contains(err.Error(), "needs 2 of the 3") || !strings.Contains(err.Error(), "cp-3") {
		t.Fatalf("two nodes down: %v", err)
	}
	if held(nodes[0]) != "" {
		t.Errorf("cp-1 stays locked by a run that did not get the lock: %q", held(nodes[0]))
	}
	if _, err := Take(ctx, controlPlane(t, "solo"), run("homelab up"), Options{}); err != nil {
		t.Errorf("a single control-plane node: %v", err)
	}
	// A restore runs when most of the control plane may be gone: the one
	// node left is enough, and still refuses a second restore.
	restore, err := Take(ctx, nodes, run("homelab etcd restore"), Options{Reachable: true})
	if err != nil {
		t.Fatalf("a restore with one node reachable: %v", err)
	}
	if _, err := Take(ctx, nodes, run("homelab etcd restore"), Options{Reachable: true}); err == nil {
		t.Error("a second restore took the lock the first holds")
	}
	restore.Release(ctx, nodes)
}

// --break-lock takes a dead run's lock, saying whose it was; the old run,
// should it still be alive, releases nothing of the new one's.
func TestBreakingTheLock(t *testing.T) {
	ctx := context.Background()
	nodes := controlPlane(t, "cp-1", "cp-2", "cp-3")
	old, err := Take(ctx, nodes, run("homelab etcd restore"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	now := run("homelab up")
	if _, err := Take(ctx, nodes, now, Options{Break: true, Warn: func(s string) { warned = append(warned, s) }}); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 3 || !strings.Contains(warned[0], "homelab etcd restore") {
		t.Errorf("breaking said: %q", warned)
	}
	old.Release(ctx, nodes)
	for _, n := range nodes {
		if !strings.Contains(held(n), now.ID) {
			t.Errorf("%s: the old run's release took the new lock: %q", n.Name, held(n))
		}
	}
}

// A holder on this machine whose process is gone is known gone; a live
// one, or one on another machine, is not.
func TestGoneHere(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	execed(cmd.Process.Pid, "sleep")
	here := machineID()
	if here == "" {
		toolstest.Missing(t, "no /etc/machine-id on this machine")
	}
	sleeping := Holder{ID: "x", Machine: here, PID: cmd.Process.Pid}
	if !sleeping.GoneHere() {
		t.Error("a pid running another program than homelab is a live holder")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !sleeping.GoneHere() {
		t.Error("a dead process is a live holder")
	}
	live := exec.Command("sh", "-c", "sleep 60; true", "homelab")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	execed(live.Process.Pid, "sleep 60")
	if (Holder{ID: "z", Machine: here, PID: live.Process.Pid}).GoneHere() {
		t.Error("a running homelab is gone")
	}
	host, _ := os.Hostname()
	elsewhere := Holder{ID: "y", Host: host, Machine: here + "-other", PID: 1 << 22}
	if elsewhere.GoneHere() {
		t.Error("a holder on another machine with this host name is known gone from here")
	}
}

// execed waits until process pid runs what its command line should hold:
// until the child has exec'd, its command line is this test's (CI once
// caught it there).
func execed(pid int, want string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), want) {
			return
		}
	}
}

// The lock's scripts as a node receives them.
func TestScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, scripts.Render("clusterlock/take", takeArgs{Dir: Dir, ID: "0123456789abcdef"}), "keep")
	scriptstest.Golden(t, scripts.Render("clusterlock/take", takeArgs{Dir: Dir, ID: "0123456789abcdef", Break: true}), "break")
	scriptstest.Golden(t, scripts.Render("clusterlock/release", releaseArgs{Dir: Dir, ID: "0123456789abcdef"}), "")
}
