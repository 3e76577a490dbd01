package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// fakeLab hands the steps fake nodes instead of SSH connections (through
// its configuration's dialer). A stand-in for sshd only: the steps' commands are not run,
// they are recorded and answered from each test's script, so these tests
// check what a step asks of a node and what it makes of the answers. The
// end-to-end tests run the same steps against real nodes.
type fakeLab struct {
	t     *testing.T
	nodes map[string]*fakeNode
	// seq numbers every node's events in the order they happened, so a
	// test can order what happened on different nodes.
	seq int
	// mu serializes the nodes' answers: steps reach several nodes at once.
	mu sync.Mutex
	// cfg is the steps' configuration, as one provider process's.
	cfg *Config
}

func newFakeLab(t *testing.T) *fakeLab {
	l := &fakeLab{t: t, nodes: map[string]*fakeNode{}}
	t.Cleanup(func() {
		for _, n := range l.nodes {
			if n.open != 0 {
				t.Errorf("%s: %d connections left open", n.name, n.open)
			}
		}
	})
	return l
}

// ctx is what a step runs under to reach the lab's nodes.
func (l *fakeLab) ctx() context.Context { return withConfig(context.Background(), l.config()) }

// config is the configuration the lab's steps run with: every step of a
// test shares it, as every step of an up shares its provider's.
func (l *fakeLab) config() *Config {
	if l.cfg == nil {
		c := newConfig(l.dial, realProbes)
		l.cfg = &c
	}
	return l.cfg
}

// node is the lab's node of that name, made on first use.
func (l *fakeLab) node(name string) *fakeNode {
	if n, ok := l.nodes[name]; ok {
		return n
	}
	n := &fakeNode{t: l.t, lab: l, name: name, addr: fmt.Sprintf("10.0.0.%d", 11+len(l.nodes)), hostKey: "SHA256:" + name, files: map[string]fakeFile{}}
	l.nodes[name] = n
	return n
}

// conn is a Connection to the node of that name.
func (l *fakeLab) conn(name string) Connection {
	return Connection{Node: name, Host: l.node(name).addr, User: "root", PrivateKey: "key-1", KnownHosts: "/known_hosts"}
}

func (l *fakeLab) dial(ctx context.Context, c Connection) (ssh.Executor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.nodes[c.Node]
	if !ok {
		l.t.Errorf("dialled %s, a node the lab does not have", c.Node)
		return nil, fmt.Errorf("ssh %s: no such node", c.Node)
	}
	n.dials++
	if n.dialErr != nil {
		return nil, n.dialErr
	}
	n.open++
	return &fakeConn{node: n}, nil
}

// Errors as ssh.Dial returns them.
func unreachableErr(node string) error {
	return fmt.Errorf("ssh %s (10.0.0.1:22): %w", node, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

func keyRefusedErr(node string) error {
	return fmt.Errorf("ssh %s (10.0.0.1:22): %w", node,
		errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"))
}

func hostKeyChangedErr(node string) error {
	return &ssh.HostKeyChangedError{Node: node, Host: "10.0.0.1", KnownHosts: "/known_hosts", Want: []string{"SHA256:old"}, Lines: []int{1}, Got: "SHA256:new", GotType: "ssh-ed25519"}
}

type fakeFile struct {
	content []byte
	mode    os.FileMode
}

// fakeEvent is one thing a step did on a node, as the command log has it.
type fakeEvent struct {
	kind     string // run, upload, read, tunnel
	mutating bool
	cmd      string // the command, or the path
	stdin    string
	seq      int // the lab's count of events when it happened
}

type fakeAnswer struct {
	// script is the name of the script answered (matched by identity:
	// scripts.NameOf), or anyScript; with, when set, picks the renderings
	// that hold it (one run directory's, one node's).
	script, with string
	answer       func(cmd string) (ssh.Result, error)
}

// anyScript answers every script: a node whose every API read fails, say.
const anyScript = "*"

type fakeNode struct {
	t       *testing.T
	lab     *fakeLab
	name    string
	addr    string
	hostKey string
	files   map[string]fakeFile
	answers []fakeAnswer
	events  []fakeEvent
	// dialErr, when set, is what dialling the node returns.
	dialErr     error
	dials, open int
}

// onScript answers every rendering of the script name (infra/scripts)
// with stdout and exit code; a later answer for the same script wins.
func (n *fakeNode) onScript(name, stdout string, exit int) {
	n.onScriptWith(name, "", stdout, exit)
}

func (n *fakeNode) onScriptFunc(name string, answer func(cmd string) (ssh.Result, error)) {
	n.onScriptWithFunc(name, "", answer)
}

// onScriptWith answers the renderings of name that hold with (a run
// directory, a quoted node name); a later answer wins.
func (n *fakeNode) onScriptWith(name, with, stdout string, exit int) {
	n.onScriptWithFunc(name, with, func(string) (ssh.Result, error) { return ssh.Result{Stdout: []byte(stdout), ExitCode: exit}, nil })
}

func (n *fakeNode) onScriptWithFunc(name, with string, answer func(cmd string) (ssh.Result, error)) {
	if name != anyScript && !slices.Contains(scripts.Names(), name) {
		n.t.Fatalf("onScript: no script %q", name)
	}
	n.answers = append([]fakeAnswer{{script: name, with: with, answer: answer}}, n.answers...)
}

// ran counts the renderings of the script name the node received.
func (n *fakeNode) ran(name string) int {
	count := 0
	for _, e := range n.events {
		if got, ok := scripts.NameOf(e.cmd); ok && got == name {
			count++
		}
	}
	return count
}

// put is a file on the node as its own tools left it.
func (n *fakeNode) put(path, content string, mode os.FileMode) {
	n.files[path] = fakeFile{[]byte(content), mode}
}

// mutations are the commands and uploads that change the node.
func (n *fakeNode) mutations() []string {
	var out []string
	for _, e := range n.events {
		if e.mutating {
			out = append(out, e.kind+" "+e.cmd)
		}
	}
	return out
}

// asked reports whether any command or path the node saw contains s.
func (n *fakeNode) asked(s string) bool {
	for _, e := range n.events {
		if strings.Contains(e.cmd, s) {
			return true
		}
	}
	return false
}

func (n *fakeNode) reset() { n.events, n.dials = nil, 0 }

// record adds e to the node's events, numbered in the lab's order.
func (n *fakeNode) record(e fakeEvent) {
	n.lab.seq++
	e.seq = n.lab.seq
	n.events = append(n.events, e)
}

type fakeConn struct {
	node   *fakeNode
	closed bool
}

var _ ssh.Executor = (*fakeConn)(nil)

func (c *fakeConn) exec(ctx context.Context, kind string, mutating bool, cmd, stdin string) (ssh.Result, error) {
	n := c.node
	n.lab.mu.Lock()
	defer n.lab.mu.Unlock()
	if c.closed {
		return ssh.Result{ExitCode: -1}, fmt.Errorf("ssh %s: %w", n.name, net.ErrClosed)
	}
	// As an SSH session: one opened under a cancelled context never
	// reaches the node.
	if err := ctx.Err(); err != nil {
		return ssh.Result{ExitCode: -1}, fmt.Errorf("ssh %s: %w", n.name, err)
	}
	n.record(fakeEvent{kind: kind, mutating: mutating, cmd: cmd, stdin: stdin})
	script, ok := scripts.NameOf(cmd)
	for _, a := range n.answers {
		if ok && (a.script == script || a.script == anyScript) && strings.Contains(cmd, a.with) {
			return a.answer(cmd)
		}
	}
	// A command no test expected: a sh that does not know it.
	n.t.Errorf("%s: unexpected command %q", n.name, cmd)
	return ssh.Result{Stderr: []byte("sh: not found"), ExitCode: 127}, nil
}

func (c *fakeConn) Run(ctx context.Context, cmd string) (ssh.Result, error) {
	return c.exec(ctx, "run", true, cmd, "")
}

func (c *fakeConn) RunInput(ctx context.Context, cmd string, stdin []byte) (ssh.Result, error) {
	return c.exec(ctx, "run", true, cmd, string(stdin))
}

func (c *fakeConn) Query(ctx context.Context, cmd string) (ssh.Result, error) {
	return c.exec(ctx, "run", false, cmd, "")
}

func (c *fakeConn) Upload(ctx context.Context, path string, content []byte, mode os.FileMode) error {
	n := c.node
	n.lab.mu.Lock()
	defer n.lab.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	n.record(fakeEvent{kind: "upload", mutating: true, cmd: path})
	n.files[path] = fakeFile{append([]byte(nil), content...), mode}
	return nil
}

func (c *fakeConn) Read(ctx context.Context, path string) ([]byte, error) {
	n := c.node
	n.lab.mu.Lock()
	defer n.lab.mu.Unlock()
	if c.closed {
		return nil, net.ErrClosed
	}
	n.record(fakeEvent{kind: "read", cmd: path})
	f, ok := n.files[path]
	if !ok {
		return nil, &fs.PathError{Op: "ssh read", Path: n.name + ":" + path, Err: fs.ErrNotExist}
	}
	return f.content, nil
}

func (c *fakeConn) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("ssh %s: forward to %s: the fake node has no services", c.node.name, addr)
}

func (c *fakeConn) Note(action string) error {
	c.node.lab.mu.Lock()
	defer c.node.lab.mu.Unlock()
	c.node.record(fakeEvent{kind: "tunnel", mutating: true, cmd: action})
	return nil
}

func (c *fakeConn) HostKey() string { return c.node.hostKey }

func (c *fakeConn) Close() error {
	c.node.lab.mu.Lock()
	defer c.node.lab.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	c.node.open--
	return nil
}
