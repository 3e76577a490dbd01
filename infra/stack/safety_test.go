package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/roles/pki"
)

// safeNodes is a 5-node homelab under other names than the shipped lab's,
// so nothing can lean on "cp-1" being first.
const safeNodes = `nodes:
  - {name: alpha, role: control-plane, address: 10.77.0.120, mac: "52:54:00:4d:00:78", interface: eth0}
  - {name: bravo, role: control-plane, address: 10.77.0.121, mac: "52:54:00:4d:00:79", interface: eth0}
  - {name: charlie, role: control-plane, address: 10.77.0.122, mac: "52:54:00:4d:00:7a", interface: eth0}
  - {name: w1, role: worker, address: 10.77.0.130, mac: "52:54:00:4d:00:82", interface: eth0}
  - {name: w2, role: worker, address: 10.77.0.131, mac: "52:54:00:4d:00:83", interface: eth0}
`

func safeInventory(s string) string { return withNodes(s, safeNodes, "alpha") }

// withNodes is inventory/lab.yaml s with nodes (a whole nodes: section)
// instead of its own, and the single-ip layout's endpoint node renamed.
func withNodes(s, nodes, endpointNode string) string {
	head, _, _ := strings.Cut(s, "\nnodes:\n")
	return strings.Replace(head, "node: cp-1 ", "node: "+endpointNode+" ", 1) + "\n" + nodes
}

// TestSafeEditsInTheLab is issue 18's end to end: every ordinary edit of
// the inventory and every interruption either changes nothing destructive
// or is refused until the user consents to that very step; etcd keeps its
// data and quorum throughout.
func TestSafeEditsInTheLab(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	e := &e2e{t: t, log: &bytes.Buffer{}}
	e.lab = labtest.UpWith(t, ctx, "safe", safeInventory, func() { t.Logf("engine output (tail):\n%s", labtest.EngineTail(e.log.String(), 100)) })
	e.work, e.invPath = e.lab.Work, e.lab.InventoryPath
	e.stateDir, e.cmdLog = filepath.Join(e.work, "state"), filepath.Join(e.work, "commands.log")

	// A single-ip build with the endpoint on the control-plane node listed
	// second is TestUpInTheLab's.
	s := e.open(ctx, e.invPath)
	e.up(ctx, s)
	e.verify(ctx, s)
	members := e.memberIDs(ctx, "alpha")
	e.mutating()

	t.Run("reordered nodes change nothing", func(t *testing.T) {
		reordered := e.inventory("reordered", func(s string) string {
			return strings.Replace(safeInventory(s), safeNodes, `nodes:
  - {name: w2, role: worker, address: 10.77.0.131, mac: "52:54:00:4d:00:83", interface: eth0}
  - {name: charlie, role: control-plane, address: 10.77.0.122, mac: "52:54:00:4d:00:7a", interface: eth0}
  - {name: w1, role: worker, address: 10.77.0.130, mac: "52:54:00:4d:00:82", interface: eth0}
  - {name: bravo, role: control-plane, address: 10.77.0.121, mac: "52:54:00:4d:00:79", interface: eth0}
  - {name: alpha, role: control-plane, address: 10.77.0.120, mac: "52:54:00:4d:00:78", interface: eth0}
`, 1)
		})
		changes := e.up(ctx, e.open(ctx, reordered))
		for op, n := range changes {
			if op != "same" && n > 0 {
				t.Errorf("reordered inventory: %d %s", n, op)
			}
		}
		if m := e.mutating(); len(m) > 0 {
			t.Errorf("reordered inventory ran %d mutating commands: %v", len(m), m)
		}
		if got := e.memberIDs(ctx, "alpha"); !slices.Equal(got, members) {
			t.Errorf("etcd members %v after reordering, were %v", got, members)
		}
	})

	t.Run("another cluster's bundle is refused", func(t *testing.T) {
		other, err := pki.New()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(e.work, "other-secrets.yaml")
		if _, err := WriteBundle(path, other); err != nil {
			t.Fatal(err)
		}
		o := e.options(e.invPath)
		o.StateDir, o.Secrets = filepath.Join(e.work, "other-state"), path
		so, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		e.mutating()
		_, err = so.Up(ctx, true)
		ours, _ := s.Bundle.CACertHash()
		theirs, _ := other.CACertHash()
		if err == nil || !strings.Contains(err.Error(), "another cluster") || !strings.Contains(err.Error(), ours) || !strings.Contains(err.Error(), theirs) {
			t.Errorf("up with another cluster's bundle: %v", err)
		}
		if m := e.mutating(); len(m) > 0 {
			t.Errorf("up with another cluster's bundle ran %d mutating commands: %v", len(m), m)
		}
	})

	t.Run("renamed nodes are refused", func(t *testing.T) {
		for from, to := range map[string]string{"w2": "w9", "charlie": "delta"} {
			renamed := e.inventory("renamed-"+from, func(s string) string {
				return strings.Replace(safeInventory(s), "{name: "+from+",", "{name: "+to+",", 1)
			})
			e.mutating()
			_, err := e.open(ctx, renamed).Up(ctx, true)
			if err == nil || !strings.Contains(err.Error(), "joined to the cluster as "+from) || !strings.Contains(err.Error(), "--allow-destroy "+from) {
				t.Errorf("rename %s -> %s: %v", from, to, err)
			}
			if m := e.mutating(); len(m) > 0 {
				t.Errorf("rename %s -> %s ran %d mutating commands: %v", from, to, len(m), m)
			}
		}
		if got := e.memberIDs(ctx, "alpha"); !slices.Equal(got, members) {
			t.Errorf("etcd members %v after the refused renames, were %v", got, members)
		}
	})

	without := e.inventory("without-charlie", func(s string) string {
		return strings.Replace(safeInventory(s), `  - {name: charlie, role: control-plane, address: 10.77.0.122, mac: "52:54:00:4d:00:7a", interface: eth0}`+"\n", "", 1)
	})
	t.Run("removing a control-plane node needs consent", func(t *testing.T) {
		sw := e.open(ctx, without)
		_, err := sw.Up(ctx, true)
		if r := Refusals(err); len(r) == 0 || !strings.Contains(strings.Join(r, "\n"), "charlie") {
			t.Fatalf("removing charlie without consent: %v", err)
		}
		if got := e.memberIDs(ctx, "alpha"); len(got) != 3 {
			t.Errorf("etcd members %v after a refused removal", got)
		}
		if out := e.node(ctx, "charlie", "test -f /etc/kubernetes/pki/ca.key && test -d /var/lib/etcd/member && echo intact"); strings.TrimSpace(out) != "intact" {
			t.Error("charlie lost its keys or etcd data without consent")
		}
		e.up(ctx, sw, "charlie")
		if m := e.mutating(); !slices.ContainsFunc(m, func(l string) bool {
			return strings.Contains(l, ": tunnel etcd member remove ") && strings.Contains(l, "charlie")
		}) {
			t.Errorf("the command log does not show charlie's etcd member removed: %v", m)
		}
		got := e.memberIDs(ctx, "alpha")
		if len(got) != 2 || !slices.Contains(members, got[0]) || !slices.Contains(members, got[1]) {
			t.Errorf("etcd members %v after removing charlie, were %v", got, members)
		}
		if out := e.node(ctx, "charlie", "ls /etc/kubernetes/pki/ca.key /var/lib/etcd/member /etc/kubernetes/manifests/*.yaml 2>/dev/null || true"); strings.TrimSpace(out) != "" {
			t.Errorf("charlie not reset after its removal:\n%s", out)
		}
		e.verify(ctx, sw)
	})

	t.Run("an interrupted control-plane join converges", func(t *testing.T) {
		before := e.memberIDs(ctx, "alpha")
		bin := filepath.Join(e.work, "homelab")
		if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(tools.RepoRoot(), "cmd", "homelab")).CombinedOutput(); err != nil {
			t.Fatalf("building homelab: %v\n%s", err, out)
		}
		var out bytes.Buffer
		up := exec.Command(bin, "up", "-f", e.invPath, "--state-dir", e.stateDir, "--skip-verify")
		up.Stdout, up.Stderr, up.Env = &out, &out, e.env()
		if err := up.Start(); err != nil {
			t.Fatal(err)
		}
		// SIGINT once charlie's kubeadm join runs, SIGKILL a second later,
		// as a user hitting Ctrl-C and then killing the terminal would.
		joining := false
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline) && !joining; time.Sleep(300 * time.Millisecond) {
			o, err := e.lab.Run(ctx, "charlie", "test -f /var/lib/homelab/runs/kubeadm-join/pid && echo joining")
			joining = err == nil && strings.TrimSpace(o) == "joining"
		}
		if !joining {
			up.Process.Kill()
			up.Wait()
			t.Fatalf("charlie's join never started:\n%s", tail(out.String(), 60))
		}
		// A second operator's up, from another state directory, while the
		// first runs: refused before it touches anything, naming the first.
		bundles, _ := filepath.Glob(filepath.Join(e.stateDir, "*", "secrets.yaml"))
		if len(bundles) != 1 {
			t.Fatalf("secrets bundles in the state directory: %v", bundles)
		}
		secondUp := exec.CommandContext(ctx, bin, "up", "-f", e.invPath, "--state-dir", filepath.Join(e.work, "other-state"),
			"--secrets", bundles[0], "--skip-verify")
		secondUp.Env = e.env()
		second, err := secondUp.CombinedOutput()
		if err == nil || !strings.Contains(string(second), "locked by another run") ||
			!strings.Contains(string(second), fmt.Sprintf("pid %d", up.Process.Pid)) || !strings.Contains(string(second), e.stateDir) ||
			strings.Contains(string(second), "Previewing") || strings.Contains(string(second), "Updating") {
			t.Errorf("a second up while the first runs: %v\n%s", err, tail(string(second), 20))
		}
		up.Process.Signal(syscall.SIGINT)
		time.Sleep(time.Second)
		up.Process.Kill()
		up.Wait()
		t.Logf("interrupted up:\n%s", tail(out.String(), 20))
		if !strings.Contains(out.String(), "no new one starts") {
			t.Error("the first Ctrl-C did not say running node steps finish")
		}
		e.waitUnlocked(ctx)
		e.up(ctx, s)
		after := e.memberIDs(ctx, "alpha")
		if len(after) != 3 {
			t.Fatalf("etcd members after the interrupted join and the next up: %v", after)
		}
		for _, id := range before {
			if !slices.Contains(after, id) {
				t.Errorf("member %s is gone: a healthy node was reset (before %v, after %v)", id, before, after)
			}
		}
		e.verify(ctx, s)
	})

	t.Run("a partial node is not reset below quorum", func(t *testing.T) {
		members := e.memberIDs(ctx, "bravo")
		if err := e.lab.PowerOff("alpha"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.lab.PowerOn(ctx, "alpha"); err != nil {
				t.Fatal(err)
			}
		}()
		// bravo as an interrupted run leaves it: kubeadm's files, no marker.
		e.node(ctx, "bravo", "mv /etc/kubernetes/.homelab-join-complete /etc/kubernetes/.homelab-join-complete.kept")
		for _, allow := range [][]string{nil, {"bravo"}} {
			_, err := s.Up(ctx, true, allow...)
			want := "--allow-destroy bravo"
			if allow != nil {
				want = "quorum" // consent does not beat quorum
			}
			if err == nil || !strings.Contains(err.Error(), "bravo") || !strings.Contains(err.Error(), want) {
				t.Errorf("up with alpha off and bravo partial, allowing %v: %v", allow, err)
			}
			if out := e.node(ctx, "bravo", "test -d /var/lib/etcd/member && test -f /etc/kubernetes/manifests/etcd.yaml && echo intact"); strings.TrimSpace(out) != "intact" {
				t.Fatal("bravo's etcd was reset while alpha was off")
			}
		}
		if got := e.memberIDs(ctx, "bravo"); !slices.Equal(got, members) {
			t.Errorf("etcd members %v, were %v", got, members)
		}
		e.node(ctx, "bravo", "mv /etc/kubernetes/.homelab-join-complete.kept /etc/kubernetes/.homelab-join-complete")
	})
	e.waitHealthy(ctx, "alpha")
	e.up(ctx, s)
	e.verify(ctx, s)
}

// memberIDs lists etcd's member IDs, sorted, as etcdctl on node sees them.
func (e *e2e) memberIDs(ctx context.Context, node string) []string {
	e.t.Helper()
	out := e.node(ctx, node, "etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt "+
		"--cert /etc/kubernetes/pki/apiserver-etcd-client.crt --key /etc/kubernetes/pki/apiserver-etcd-client.key member list")
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if id, _, ok := strings.Cut(line, ","); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// waitUnlocked waits until no live pulumi process holds the stack's lock
// and no provider it started lives on: an up killed outright leaves its
// CLI and provider winding down on their own (or dying on their closed
// output), and the next up clears a dead one's lock itself.
func (e *e2e) waitUnlocked(ctx context.Context) {
	e.t.Helper()
	locks := filepath.Join(e.stateDir, "backend", ".pulumi", "locks")
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		live := false
		filepath.Walk(locks, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return nil
			}
			var lock struct {
				Pid int `json:"pid"`
			}
			data, _ := os.ReadFile(p)
			if json.Unmarshal(data, &lock) == nil && lock.Pid > 0 && syscall.Kill(lock.Pid, 0) == nil {
				live = true
			}
			return nil
		})
		if !live && len(orphanProviders(pulumiHome(e.stateDir))) == 0 {
			return
		}
	}
	e.t.Fatal("the interrupted up's CLI still holds the stack's lock after 5 minutes")
}

// waitHealthy waits for node's etcd member to serve again.
func (e *e2e) waitHealthy(ctx context.Context, node string) {
	e.t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if _, err := e.lab.Run(ctx, node, "etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt "+
			"--cert /etc/kubernetes/pki/apiserver-etcd-client.crt --key /etc/kubernetes/pki/apiserver-etcd-client.key endpoint health"); err == nil {
			return
		}
	}
	e.t.Fatalf("%s's etcd is not healthy 3 minutes after power-on", node)
}
