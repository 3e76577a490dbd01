// Package labtest brings the emulated homelab up for one end-to-end test
// and down after it: one of the machine's lab slots (lab.Slots labs at a
// time, each with its own names), a lab directory under /srv,
// inventory/lab.yaml with the lab's SSH paths, and SSH dialling from the
// lab's gateway namespace.
package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/hostkeys"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

// EnvKeep keeps a failed test's lab up, for a look inside.
const EnvKeep = envvars.E2EKeep

// Need skips the test unless HOMELAB_E2E=1 and it runs as root (with
// HOMELAB_REQUIRE_TOOLS=1, as in CI, not being root fails it instead),
// requires the tools named, and then holds one of the machine's lab slots
// for the test: call it before setting the test's deadlines.
func Need(t testing.TB, toolNames ...string) {
	t.Helper()
	if os.Getenv(lab.EnvE2E) != "1" {
		t.Skipf("set %s=1 to run: builds the emulated homelab and a cluster on it (root)", lab.EnvE2E)
	}
	if os.Geteuid() != 0 {
		if os.Getenv(envvars.RequireTools) == "1" {
			t.Fatal("the emulated homelab needs root")
		}
		t.Skip("the emulated homelab needs root")
	}
	for _, name := range toolNames {
		toolstest.Require(t, name)
	}
	hold(t)
}

// parallel are the tests that run beside others of their package.
var parallel sync.Map

// Parallel runs t beside the other parallel tests of its package, each on
// its own lab (as many at once as go test's -parallel and the machine's
// lab slots allow). Call it first, before Need: a test paused by
// t.Parallel while holding a slot would keep it from the tests it waits
// for. Such a test gets no process-wide environment from Up: it gives
// its lab's gateway (Lab.Names) and command log to what it runs itself.
func Parallel(t *testing.T) {
	t.Helper()
	parallel.Store(t, true)
	t.Cleanup(func() { parallel.Delete(t) })
	t.Parallel()
}

// EnvLong runs the lab tests CI leaves out.
const EnvLong = envvars.E2ELong

// Long skips a lab test CI leaves out unless HOMELAB_E2E_LONG=1: one that
// would take CI past its 90 minutes (the lab runs one test at a time on
// two cores). why says what it costs; call it before Need.
func Long(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvLong) != "1" {
		t.Skipf("%s: set %s=1 (with %s=1) to run it; CI's time leaves it out", why, EnvLong, lab.EnvE2E)
	}
}

// holding are the tests that hold a lab slot.
var holding sync.Map

// hold takes a lab slot for t, once. Need takes it, before the test sets
// its deadlines: a test that waited for other packages' lab tests with its
// clock running once found its context spent before its lab booted (every
// node "no SSH login", after fourteen minutes of waiting).
func hold(t testing.TB) {
	t.Helper()
	if _, ok := holding.Load(t); ok {
		return
	}
	if err := lab.HoldSlot(t); err != nil {
		t.Fatal(err)
	}
	holding.Store(t, true)
	t.Cleanup(func() { holding.Delete(t) })
}

// Lab is a lab up for one test.
type Lab struct {
	*lab.Lab
	// Dir is the lab's directory; Work the test's own temporary one.
	Dir, Work string
	// InventoryPath is inventory/lab.yaml as this lab needs it.
	InventoryPath string
	// base is UpWith's edit: every variant starts from the lab's own
	// nodes, not from the file's.
	base func(string) string
	t    testing.TB
}

// Up takes a lab slot, brings a lab up from inventory/lab.yaml in a new
// directory /srv/homelab-NAME-test-*, and takes it down when the test
// ends. onFail (may be nil) runs first when the test failed: to log what
// the test gathered.
func Up(t testing.TB, ctx context.Context, name string, onFail func()) *Lab {
	t.Helper()
	return UpWith(t, ctx, name, nil, onFail)
}

// UpWith is Up with inventory/lab.yaml edited first (other nodes, other
// names): the lab is built from the edited inventory, InventoryPath.
func UpWith(t testing.TB, ctx context.Context, name string, edit func(string) string, onFail func()) *Lab {
	t.Helper()
	return UpSystemd(t, ctx, name, edit, nil, onFail)
}

// UpSystemd is UpWith with the named nodes real (lab.Lab.Systemd): Debian
// booted with systemd, containerd, runc and the real kubelet.
func UpSystemd(t testing.TB, ctx context.Context, name string, edit func(string) string, systemd []string, onFail func()) *Lab {
	t.Helper()
	hold(t)
	tl, err := upOnce(t, ctx, name, t.TempDir(), edit, systemd)
	if err != nil {
		t.Fatal(err)
	}
	l, dir := tl.Lab, tl.Dir
	t.Cleanup(func() {
		if t.Failed() && onFail != nil {
			onFail()
		}
		if t.Failed() && os.Getenv(EnvKeep) == "1" {
			t.Logf("lab kept in %s (%s=1)", dir, EnvKeep)
			return
		}
		if err := l.Down(false); err != nil {
			t.Errorf("lab down: %v", err)
		}
		os.RemoveAll(dir)
	})
	if _, ok := parallel.Load(t); !ok {
		t.Setenv(ssh.NetnsEnv, l.Names().GatewayPath())
	}
	return tl
}

// upOnce brings a lab up in a new directory, or leaves nothing behind.
func upOnce(t testing.TB, ctx context.Context, name, work string, edit func(string) string, systemd []string) (*Lab, error) {
	t.Helper()
	dir, err := os.MkdirTemp("/srv", "homelab-"+name+"-test-")
	if err != nil {
		return nil, err
	}
	l, err := lab.Open(dir)
	if err != nil {
		return nil, err
	}
	l.Systemd = systemd
	tl := &Lab{Lab: l, Dir: dir, Work: work, base: edit, t: t}
	tl.InventoryPath = tl.Inventory("lab", nil)
	if _, _, err := l.Up(ctx, tl.InventoryPath); err != nil {
		// Down first: a lab partly up has nodes running, and its state is
		// what finds them; removing the directory alone would orphan them
		// (and fail every later test on the machine).
		if derr := l.Down(false); derr != nil {
			t.Logf("lab down after a failed up: %v", derr)
		}
		os.RemoveAll(dir)
		return nil, err
	}
	return tl, nil
}

// Inventory writes inventory/lab.yaml as UpWith edited it, with this lab's
// SSH key, known_hosts and Cilium chart, edited by edit (nil: as it is), as
// NAME.yaml in Work.
func (l *Lab) Inventory(name string, edit func(string) string) string {
	l.t.Helper()
	data, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "inventory", "lab.yaml"))
	if err != nil {
		l.t.Fatal(err)
	}
	// The lab's files (SSH key, known_hosts, the Cilium stand-in chart)
	// are under this lab's directory, not the default one.
	s := strings.ReplaceAll(string(data), lab.DefaultDir+"/", l.Dir+"/")
	if l.base != nil {
		s = l.base(s)
	}
	if edit != nil {
		s = edit(s)
	}
	p := filepath.Join(l.Work, name+".yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return p
}

// Dial connects from this lab's gateway namespace, as the provisioner
// does.
func (l *Lab) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return netns.Dial(ctx, l.Names().GatewayPath(), network, addr)
}

// Main is TestMain for a package whose tests run the Pulumi engine: the
// engine starts the provider plugin as pulumi-resource-homelab, a link to
// the running binary, which is then the test binary.
func Main(m *testing.M) {
	if filepath.Base(os.Args[0]) == "pulumi-resource-"+provider.Name {
		if err := provider.Serve(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Mutating returns the mutating commands the command log at path
// (ssh.CommandLogEnv) holds, as "node: kind cmd", and empties it, so each
// call sees what ran since the last. The cluster lock's take and release
// (infra/clusterlock) are left out: every changing command runs them, and
// they change nothing of the cluster.
func Mutating(path string) []string {
	data, _ := os.ReadFile(path)
	os.Remove(path)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev ssh.Event
		if line == "" || json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		if ev.Mutating && !strings.Contains(ev.Cmd, clusterlock.Dir) {
			out = append(out, ev.Node+": "+ev.Kind+" "+ev.Cmd)
		}
	}
	return out
}

// AcceptHostKey is what the user does after `lab replace NODE`: read the
// new host key's fingerprint on the machine's console (here through the
// lab's own record) and accept exactly that key into the provisioner's
// known_hosts, as `homelab hosts accept NODE --fingerprint` does.
func (l *Lab) AcceptHostKey(ctx context.Context, node string) error {
	st, err := l.LoadState()
	if err != nil {
		return err
	}
	n, err := st.Node(node)
	if err != nil {
		return err
	}
	out, err := l.Run(ctx, node, "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")
	if err != nil {
		return err
	}
	console := strings.Fields(out)
	if len(console) < 2 || !strings.HasPrefix(console[1], "SHA256:") {
		return fmt.Errorf("%s's console shows %q", node, out)
	}
	dial := hostkeys.DialFunc(l.Dial)
	addr, hosts := net.JoinHostPort(n.Address, "22"), hostkeys.Hosts(n.Name, n.Address, 22)
	_, err = hostkeys.Accept(ctx, dial, l.KnownHostsPath(), hosts, addr, hostkeys.MatchFingerprint(console[1]))
	return err
}

// EngineTail is what a failed lab test logs of the Pulumi engine's output:
// its last n lines, then every resource's block from the last Diagnostics
// section that holds an error, in full. CI shows a failure's head and tail
// only, and a long diagnostics section once cut exactly the errors a
// one-off failure needed (2 errored, neither named).
func EngineTail(out string, n int) string {
	lines := strings.Split(out, "\n")
	tailed := lines
	if len(tailed) > n {
		tailed = tailed[len(tailed)-n:]
	}
	var b strings.Builder
	b.WriteString(strings.Join(tailed, "\n"))
	if errs := failedBlocks(lines); len(errs) > 0 {
		b.WriteString("\nresources that failed:\n")
		b.WriteString(strings.Join(errs, "\n"))
	}
	return b.String()
}

// failedBlocks are the blocks of the last Diagnostics section with an
// error in them; a block is a resource's heading and its indented lines.
func failedBlocks(lines []string) []string {
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "Diagnostics:" {
			start = i + 1
		}
	}
	if start < 0 {
		return nil
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var blocks []string
	var cur []string
	headIndent := -1
	flush := func() {
		for _, l := range cur[min(1, len(cur)):] {
			// The engine's own mark, not a message that quotes one.
			if strings.HasPrefix(strings.TrimSpace(l), "error:") {
				blocks = append(blocks, strings.Join(cur, "\n"))
				break
			}
		}
		cur = nil
	}
	for _, l := range lines[start:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if headIndent < 0 {
			headIndent = indent(l)
		}
		switch {
		case indent(l) < headIndent:
			flush()
			return blocks
		case indent(l) == headIndent:
			flush()
		}
		cur = append(cur, l)
	}
	flush()
	return blocks
}

// S3 forwards a loopback port of this machine to the lab's S3 server and
// returns its endpoint, with the keys in the form of the engine's
// environment. The Pulumi CLI a test starts runs in the machine's own
// namespace, as on an operator's workstation the lab's gateway stands
// for; a user of the lab runs it inside, with `homelab-lab exec`, and
// reaches lab.S3Endpoint directly. The forward ends with the test.
func (l *Lab) S3(ctx context.Context) (endpoint string, env map[string]string) {
	l.t.Helper()
	id, secret, err := l.S3Keys()
	if err != nil {
		l.t.Fatal(err)
	}
	s, err := l.LoadState()
	if err != nil {
		l.t.Fatal(err)
	}
	target := net.JoinHostPort(s.Gateway, lab.S3Port)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := l.Dial(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }()
				go func() { io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String(), map[string]string{"AWS_ACCESS_KEY_ID": id, "AWS_SECRET_ACCESS_KEY": secret}
}
