package ssh

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/homelab-dev/homelab/infra/netns"
)

// The tests run a real sshd inside a network namespace they create, and
// reach it only through infra/netns: nothing leaves the namespace's
// loopback.

const sshdPath = "/usr/sbin/sshd"

// needTools skips (or, with HOMELAB_REQUIRE_TOOLS=1, fails) when the
// machine cannot host the test sshd.
func needTools(t *testing.T) {
	t.Helper()
	missing := func(why string) { toolstest.Missing(t, why) }
	if os.Geteuid() != 0 {
		missing("needs root: the test sshd runs in a network namespace of its own")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		missing(sshdPath + " is missing (apt-get install openssh-server)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing("ip is missing (apt-get install iproute2)")
	}
	if _, err := exec.LookPath("scp"); err != nil {
		missing("scp is missing (apt-get install openssh-client): uploads run scp -t on the host")
	}
}

// env is one network namespace with a client key authorized for root.
type env struct {
	t       *testing.T
	ns      string // path, e.g. /run/netns/hlssh-test-0123abcd
	dir     string
	key     []byte // client private key, PEM
	authKey string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	needTools(t)
	var b [4]byte
	rand.Read(b[:])
	name := "hlssh-test-" + hex.EncodeToString(b[:])
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	// sshd refuses to start without its privilege separation directory,
	// which the Debian service would create.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ns: filepath.Join(netns.Dir, name), dir: t.TempDir()}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	e.key = pemKey(t, priv)
	pub, _ := gossh.NewPublicKey(priv.Public())
	e.authKey = filepath.Join(e.dir, "authorized_keys")
	if err := os.WriteFile(e.authKey, gossh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func pemKey(t *testing.T, k crypto.PrivateKey) []byte {
	t.Helper()
	blk, err := gossh.MarshalPrivateKey(k, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(blk)
}

func newEd25519(t *testing.T) crypto.Signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newECDSA(t *testing.T) crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pub(t *testing.T, k crypto.Signer) gossh.PublicKey {
	p, err := gossh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sshd is one running server; stop is idempotent.
type sshd struct {
	stop func()
	pid  int // the listener's
}

// freeze stops every sshd process of this server (the listener and each
// connection's) but not the commands they run, as a host too loaded to
// answer would; it returns the thaw.
func (s *sshd) freeze(t *testing.T) (thaw func()) {
	t.Helper()
	out, err := exec.Command("ps", "-e", "-o", "pid=,ppid=,comm=").Output()
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	comm := map[int]string{}
	for _, line := range strings.Split(string(out), "\n") {
		var pid, ppid int
		var name string
		if n, _ := fmt.Sscan(line, &pid, &ppid, &name); n == 3 {
			children[ppid] = append(children[ppid], pid)
			comm[pid] = name
		}
	}
	var frozen []int
	var walk func(int)
	walk = func(pid int) {
		if comm[pid] == "sshd" {
			syscall.Kill(pid, syscall.SIGSTOP)
			frozen = append(frozen, pid)
		}
		for _, c := range children[pid] {
			walk(c)
		}
	}
	walk(s.pid)
	if len(frozen) < 2 {
		t.Fatalf("froze %v: no connection's sshd under listener %d", frozen, s.pid)
	}
	return func() {
		for _, pid := range frozen {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// startSSHD runs sshd on 127.0.0.1:port inside the namespace with the given
// host keys, and waits until it greets.
func (e *env) startSSHD(port int, hostKeys ...crypto.Signer) *sshd {
	t := e.t
	t.Helper()
	var conf strings.Builder
	fmt.Fprintf(&conf, "ListenAddress 127.0.0.1:%d\n", port)
	for i, k := range hostKeys {
		p := filepath.Join(e.dir, fmt.Sprintf("host_key_%d_%d", port, i))
		if err := os.WriteFile(p, pemKey(t, k), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "HostKey %s\n", p)
	}
	fmt.Fprintf(&conf, "AuthorizedKeysFile %s\n", e.authKey)
	conf.WriteString("PidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n" +
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nLogLevel ERROR\n")
	cfgPath := filepath.Join(e.dir, fmt.Sprintf("sshd_config_%d", port))
	if err := os.WriteFile(cfgPath, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", filepath.Base(e.ns), sshdPath, "-D", "-e", "-f", cfgPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(3 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() && logs.String() != "" {
			t.Logf("sshd on port %d said:\n%s", port, logs.String())
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if greets(e.ns, port) {
			return &sshd{stop: stop, pid: cmd.Process.Pid}
		}
		select {
		case <-exited:
			t.Fatalf("sshd exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not start listening: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func greets(ns string, port int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := netns.Dial(ctx, ns, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// knownHosts writes a known_hosts file listing keys for 127.0.0.1:port.
func (e *env) knownHosts(port int, keys ...gossh.PublicKey) string {
	e.t.Helper()
	var b strings.Builder
	b.WriteString("# written by the test\n")
	for _, k := range keys {
		b.WriteString(knownhosts.Line([]string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, k) + "\n")
	}
	f, err := os.CreateTemp(e.dir, "known_hosts")
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		e.t.Fatal(err)
	}
	return f.Name()
}

func (e *env) target(port int, knownHosts string) Target {
	return Target{Name: "test-node", Address: "127.0.0.1", Port: port, User: "root", PrivateKey: e.key, KnownHosts: knownHosts}
}

// dial connects through the namespace, failing the test on error.
func (e *env) dial(port int, knownHosts string, opts ...Option) *Client {
	e.t.Helper()
	c, err := e.tryDial(port, knownHosts, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func (e *env) tryDial(port int, knownHosts string, opts ...Option) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]Option{WithDialer(netns.DialerFor(e.ns)), WithRetry(0)}, opts...)
	return Dial(ctx, e.target(port, knownHosts), opts...)
}
