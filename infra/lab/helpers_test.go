package lab

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// EnvKeep keeps a failed test's lab up for inspection.
const EnvKeep = envvars.E2EKeep

const labInventory = "../../inventory/lab.yaml"

// needLab skips unless asked to (and able to) run a lab.
func needLab(tb testing.TB) {
	tb.Helper()
	if os.Getenv(EnvE2E) != "1" {
		tb.Skipf("set %s=1 to run: builds a lab of network namespaces, mounts and processes (root)", EnvE2E)
	}
	// Asked for but impossible: a skip would hide it in CI.
	cannot := tb.Skipf
	if os.Getenv(envvars.RequireTools) == "1" {
		cannot = tb.Fatalf
	}
	if os.Geteuid() != 0 {
		cannot("the lab needs root")
	}
	for _, p := range hostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			cannot("the lab needs %s (infra/tools/setup.sh installs it)", p)
		}
	}
}

// newTestLab returns a lab in a fresh directory under /srv (not /tmp: the
// nodes hide /tmp), brought down and checked for leftovers at the end. It
// holds one of the machine's lab slots meanwhile (one per test, however
// many labs it makes: a test of two small labs must not wait for itself).
func newTestLab(tb testing.TB) *Lab {
	tb.Helper()
	if _, held := holdingSlot.LoadOrStore(tb, true); !held {
		if err := HoldSlot(tb); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { holdingSlot.Delete(tb) })
	}
	dir, err := os.MkdirTemp("/srv", "homelab-lab-test-")
	if err != nil {
		tb.Fatal(err)
	}
	l, err := Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	l.Log = testLog{tb}
	tb.Cleanup(func() {
		if tb.Failed() {
			dumpNodes(tb, l)
			if os.Getenv(EnvKeep) == "1" {
				tb.Logf("keeping the failed lab: HOMELAB_LAB_DIR=%s homelab-lab ssh NODE; then homelab-lab down", dir)
				return
			}
		}
		if _, err := l.LoadState(); err == nil {
			if err := l.Down(false); err != nil {
				tb.Errorf("down: %v", err)
			}
		}
		os.RemoveAll(dir)
	})
	return l
}

// holdingSlot are the tests holding a lab slot.
var holdingSlot sync.Map

type testLog struct{ tb testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.tb.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func up(tb testing.TB, l *Lab) *State {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s, already, err := l.Up(ctx, labInventory)
	if err != nil {
		tb.Fatalf("lab up: %v", err)
	}
	if already {
		tb.Fatal("lab up found a lab already up in a fresh directory")
	}
	return s
}

// tracked lists every process the lab runs: its gateway's servers, each
// node's unshare, its PID 1 and everything in its PID namespace.
func tracked(s *State) []*Proc {
	var out []*Proc
	for _, p := range []*Proc{s.AptServer, s.RegistryServer, s.S3Server, s.DHCPServer} {
		if p != nil {
			out = append(out, p)
		}
	}
	for _, n := range s.Nodes {
		if n.Unshare != nil {
			out = append(out, n.Unshare)
		}
		if n.Init != nil {
			out = append(out, n.Init)
		}
		for _, pid := range pidsInNS(n.PIDNS) {
			if p, err := procOf(pid); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// downLeavesNothing brings the lab down and checks that no lab namespace,
// mount, link or process remains.
func downLeavesNothing(tb testing.TB, l *Lab) {
	tb.Helper()
	s, err := l.LoadState()
	if err != nil {
		tb.Fatal(err)
	}
	procs := tracked(s)
	if len(procs) == 0 {
		tb.Fatal("no tracked processes before down")
	}
	start := time.Now()
	if err := l.Down(false); err != nil {
		tb.Fatalf("down: %v", err)
	}
	tb.Logf("lab down in %s", time.Since(start).Round(time.Millisecond))
	for _, p := range procs {
		if p.Alive() {
			tb.Errorf("process %d (%s) survived down", p.PID, procName(p.PID))
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, l.Names().Prefix) {
			tb.Errorf("network namespace left: %s", line)
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, l.Dir) || strings.Contains(line, filepath.Join(netnsDir, l.Names().Prefix)) {
			tb.Errorf("mount left: %s", line)
		}
	}
	// Veths only ever live in lab namespaces; none may reach this one.
	out, _ = exec.Command("ip", "-o", "link", "show", "type", "veth").Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		tb.Errorf("veths in the machine's namespace: %s", out)
	}
	if _, err := os.Stat(l.Dir); err == nil {
		tb.Errorf("lab directory %s left", l.Dir)
	}
}

// noLabAddressHere checks the safety rule: the machine's own namespace has
// no address or route in the lab subnet.
func noLabAddressHere(tb testing.TB, s *State) {
	tb.Helper()
	prefix := strings.TrimSuffix(s.Gateway, lastOctet(s.Gateway))
	for _, args := range [][]string{{"-o", "addr"}, {"route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			tb.Fatal(err)
		}
		if strings.Contains(string(out), prefix) {
			tb.Errorf("the machine's namespace has a lab address or route (ip %s):\n%s", strings.Join(args, " "), out)
		}
	}
}

func lastOctet(a string) string {
	return a[strings.LastIndexByte(a, '.')+1:]
}

// dumpNodes logs what a failed test needs to see: each running node's
// console and the logs its init keeps per unit.
func dumpNodes(tb testing.TB, l *Lab) {
	s, err := l.LoadState()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range s.Nodes {
		if n.Power != powerOn {
			continue
		}
		tb.Logf("--- %s\n%s", n.Name, l.consoleTail(n.Name))
		logs := "for f in /var/log/homelab/*.log; do echo \"== $f\"; tail -n 15 \"$f\"; done"
		if n.System == SystemSystemd {
			logs = "systemctl --failed --no-legend; journalctl -q -n 60 --no-pager"
		}
		out, _ := l.Run(ctx, n.Name, logs)
		tb.Logf("%s", out)
	}
}
