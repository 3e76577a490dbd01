// Package ssh is the narrow edge through which homelab touches machines:
// run a command, upload a file, read a file. Everything above it renders
// commands and files without doing I/O; everything here does I/O and
// nothing else.
//
// Host keys are always checked against a known_hosts file, and a changed or
// unknown key is a typed error, never a prompt or a silent accept.
package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	scp "github.com/bramvdbogaerde/go-scp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/scripts"
)

// Target is one machine to connect to.
type Target struct {
	Name       string // node name, for messages
	Address    string
	Port       int // 22 when zero
	User       string
	PrivateKey []byte // PEM; a secret: never log it
	KnownHosts string // path to a known_hosts file
}

// String leaves the private key out, so printing a Target with %v or %+v
// cannot leak it.
func (t Target) String() string {
	return fmt.Sprintf("%s (%s@%s)", t.Name, t.User, net.JoinHostPort(t.Address, strconv.Itoa(t.port())))
}

// GoString does the same for %#v.
func (t Target) GoString() string {
	return fmt.Sprintf("ssh.Target{Name:%q, Address:%q, Port:%d, User:%q, PrivateKey:<redacted>, KnownHosts:%q}",
		t.Name, t.Address, t.Port, t.User, t.KnownHosts)
}

func (t Target) port() int {
	if t.Port == 0 {
		return 22
	}
	return t.Port
}

func (t Target) node() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Address
}

// Result is what a command left behind. ExitCode is 128+N when signal N
// killed it, as shells report it, and -1 when the host did not say.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Executor is what machine-touching code depends on, so it can be given
// something other than a live connection.
type Executor interface {
	// Run runs a command through the remote user's shell and records it as
	// mutating. A non-zero exit is not an error: it is in Result; errors
	// are transport failures and cancellation.
	Run(ctx context.Context, cmd string) (Result, error)
	// RunInput is Run with stdin. Stdin is never recorded.
	RunInput(ctx context.Context, cmd string, stdin []byte) (Result, error)
	// Query is Run for commands that change nothing; only the record
	// differs.
	Query(ctx context.Context, cmd string) (Result, error)
	// Upload writes a file atomically (a temporary file in the same
	// directory, then a rename), creating parent directories, with mode.
	Upload(ctx context.Context, path string, content []byte, mode os.FileMode) error
	// Read returns a file's content; an error wrapping fs.ErrNotExist when
	// it is absent.
	Read(ctx context.Context, path string) ([]byte, error)
	// DialContext opens a connection from the machine to addr, for
	// services bound to its loopback (etcd) or on its network (the API
	// behind a VIP the caller cannot route to).
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	// Note records a change the caller is about to make through a
	// connection DialContext opened (an etcd member removed, a Helm
	// release installed), as mutating: what flows through a tunnel is
	// not a command, but the log must show every change to the cluster.
	// Its error stops the change, as a failed record stops a command.
	Note(action string) error
	// HostKey is the SHA256 fingerprint of the host key the machine
	// showed and known_hosts vouched for: who the machine is.
	HostKey() string
	Close() error
}

// DialFunc opens the transport connection.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Defaults for the options.
const (
	DefaultTimeout   = 15 * time.Second
	DefaultRetry     = 20 * time.Second
	DefaultKeepAlive = 15 * time.Second
)

// NetnsEnv, when set to a network namespace path (such as /run/netns/hl-gw),
// makes a process dial its nodes from inside that namespace
// (OptionsFromEnv).
const NetnsEnv = envvars.Netns

type options struct {
	dial      DialFunc
	timeout   time.Duration
	retry     time.Duration
	keepAlive time.Duration
	audit     []func(Event)
	logPath   string
}

// Option changes how Dial connects.
type Option func(*options)

// WithDialer replaces the default dialer, a plain TCP dial from the
// process's own network namespace.
func WithDialer(d DialFunc) Option { return func(o *options) { o.dial = d } }

// WithCommandLog appends every Event of the connection to the file at
// path as a JSON line; a command whose line cannot be written does not
// run. Empty: no log.
func WithCommandLog(path string) Option { return func(o *options) { o.logPath = path } }

// OptionsFromEnv are the options a process's environment asks for: the
// namespace NetnsEnv names and the command log CommandLogEnv names. Only
// a process's edges call it (homelab's commands, the provider's
// Configure): below them, where a connection comes from and where it is
// logged are passed explicitly.
func OptionsFromEnv() []Option {
	var opts []Option
	if ns := os.Getenv(NetnsEnv); ns != "" {
		opts = append(opts, WithDialer(netns.DialerFor(ns)))
	}
	if p := os.Getenv(CommandLogEnv); p != "" {
		opts = append(opts, WithCommandLog(p))
	}
	return opts
}

// WithTimeout bounds each connection attempt: dial plus SSH handshake. It
// does not bound the commands run later. Zero means DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithRetry sets how long Dial keeps retrying connection failures (refused,
// unreachable, reset, timed out), for nodes that are rebooting. Zero tries
// once. Host key and authentication failures are never retried.
func WithRetry(d time.Duration) Option { return func(o *options) { o.retry = d } }

// WithKeepAlive sets how often an idle connection is probed; a connection
// whose probe goes unanswered for three intervals is closed, so a command on
// a machine that vanished fails instead of hanging. Zero disables it.
func WithKeepAlive(d time.Duration) Option { return func(o *options) { o.keepAlive = d } }

// WithAudit calls fn with an Event before each command, upload and read.
func WithAudit(fn func(Event)) Option {
	return func(o *options) { o.audit = append(o.audit, fn) }
}

// Client is a connection to one machine. It is safe for concurrent use.
type Client struct {
	node    string
	hostKey string
	conn    *gossh.Client
	audit   []func(Event)
	logPath string

	closeOnce sync.Once
	closed    chan struct{}
	// sessions, when not nil, bounds the sessions open at once (a pooled
	// connection's callers share the host's MaxSessions).
	sessions chan struct{}
}

var _ Executor = (*Client)(nil)

// Dial connects to t and verifies its host key against t.KnownHosts.
func Dial(ctx context.Context, t Target, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout, retry: DefaultRetry, keepAlive: DefaultKeepAlive}
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	node := t.node()
	if t.Address == "" || t.User == "" {
		return nil, fmt.Errorf("ssh %s: target needs an address and a user", node)
	}
	signer, err := gossh.ParsePrivateKey(t.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: private key: %w", node, err)
	}
	addr := net.JoinHostPort(t.Address, strconv.Itoa(t.port()))
	hk, err := loadHostKeys(node, t.KnownHosts, addr)
	if err != nil {
		return nil, err
	}
	if o.dial == nil {
		var d net.Dialer
		o.dial = d.DialContext
	}
	cfg := &gossh.ClientConfig{
		User:              t.User,
		Auth:              []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: hk.algos,
	}

	conn, err := connect(ctx, o, addr, cfg)
	var ne *gossh.AlgorithmNegotiationError
	if errors.As(err, &ne) && ne.What == "host key" && len(hk.algos) > 0 {
		// The host has no key of any type known_hosts lists: it was
		// rekeyed with another type. Look at the key it has, which the
		// check will refuse, to report the change with its fingerprint.
		all := *cfg
		all.HostKeyAlgorithms = nil
		conn, err = connect(ctx, o, addr, &all)
	}
	if err != nil {
		var changed *HostKeyChangedError
		var unknown *UnknownHostError
		if errors.As(err, &changed) {
			return nil, changed
		}
		if errors.As(err, &unknown) {
			return nil, unknown
		}
		return nil, fmt.Errorf("ssh %s (%s): %w", node, addr, err)
	}
	c := &Client{node: node, hostKey: hk.accepted, conn: conn, audit: o.audit, logPath: o.logPath, closed: make(chan struct{})}
	if o.keepAlive > 0 {
		go c.keepAlive(o.keepAlive)
	}
	return c, nil
}

// connect makes handshakes until one succeeds, fails for good, or the retry
// window closes.
func connect(ctx context.Context, o options, addr string, cfg *gossh.ClientConfig) (*gossh.Client, error) {
	giveUp := time.Now().Add(o.retry)
	backoff := 250 * time.Millisecond
	for {
		c, err := handshake(ctx, o, addr, cfg)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		}
		if !transient(err) || time.Now().Add(backoff).After(giveUp) {
			return nil, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func handshake(ctx context.Context, o options, addr string, cfg *gossh.ClientConfig) (*gossh.Client, error) {
	hctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	conn, err := o.dial(hctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := hctx.Deadline()
	conn.SetDeadline(deadline)
	// Cancellation must also interrupt a handshake blocked in a read.
	stop := context.AfterFunc(hctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	c, chans, reqs, err := gossh.NewClientConn(conn, addr, cfg)
	if !stop() && err == nil {
		c.Close()
		return nil, hctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	// Commands may run far longer than a handshake may take.
	conn.SetDeadline(time.Time{})
	return gossh.NewClient(c, chans, reqs), nil
}

// transient reports whether a connection attempt may succeed if repeated:
// the host is down, rebooting, or its sshd is not listening yet.
func transient(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT, syscall.EPIPE,
		io.EOF, io.ErrUnexpectedEOF, os.ErrDeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *Client) keepAlive(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-tick.C:
		}
		replied := make(chan error, 1)
		go func() {
			// Any reply, even OpenSSH's refusal of this unknown request,
			// shows the peer is alive.
			_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
			replied <- err
		}()
		select {
		case err := <-replied:
			if err != nil {
				c.conn.Close()
				return
			}
		case <-time.After(3 * every):
			c.conn.Close()
			return
		case <-c.closed:
			return
		}
	}
}

// DialContext opens a connection from the node to addr through the SSH
// connection (a direct-tcpip channel), to reach services bound to the
// node's loopback such as etcd. It is not in the command log: the caller
// records the changes it makes through it with Note.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.conn.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: forward to %s: %w", c.node, addr, err)
	}
	return conn, nil
}

// Note implements Executor: a "tunnel" event.
func (c *Client) Note(action string) error { return c.record("tunnel", true, action) }

// HostKey is the SHA256 fingerprint of the verified key the host showed:
// a replaced machine shows a new one once the user has accepted it.
func (c *Client) HostKey() string { return c.hostKey }

// Close closes the connection. Commands still running are cut off.
func (c *Client) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.conn.Close()
	})
	return err
}

func (c *Client) record(kind string, mutating bool, cmd string) error {
	e := Event{Time: time.Now().UTC(), Node: c.node, Kind: kind, Mutating: mutating, Cmd: cmd}
	// The record comes first and its failure stops the action: nothing is
	// done on a machine that the log does not show.
	if c.logPath != "" {
		if err := appendEvent(c.logPath, e); err != nil {
			return fmt.Errorf("ssh %s: %w", c.node, err)
		}
	}
	for _, fn := range c.audit {
		fn(e)
	}
	return nil
}

// Run implements Executor.
func (c *Client) Run(ctx context.Context, cmd string) (Result, error) {
	if err := c.record("run", true, cmd); err != nil {
		return Result{}, err
	}
	return c.exec(ctx, cmd, nil)
}

// RunInput implements Executor.
func (c *Client) RunInput(ctx context.Context, cmd string, stdin []byte) (Result, error) {
	if err := c.record("run", true, cmd); err != nil {
		return Result{}, err
	}
	if stdin == nil {
		stdin = []byte{}
	}
	return c.exec(ctx, cmd, stdin)
}

// Query implements Executor.
func (c *Client) Query(ctx context.Context, cmd string) (Result, error) {
	if err := c.record("run", false, cmd); err != nil {
		return Result{}, err
	}
	return c.exec(ctx, cmd, nil)
}

// acquire waits for a session's turn on a connection that bounds them.
func (c *Client) acquire(ctx context.Context) error {
	if c.sessions == nil {
		return nil
	}
	select {
	case c.sessions <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) releaseSession() {
	if c.sessions != nil {
		<-c.sessions
	}
}

// refused marks a session the host would not open: nothing ran.
type refused struct{ error }

func refusedIf(cond bool, err error) error {
	if cond {
		return refused{err}
	}
	return err
}

// whileRefused calls open until the host opens the session, for up to 20 s.
// sshd counts a session against MaxSessions until it has reaped the
// session's process, which on a loaded host comes a while after the
// session ended: a connection whose callers keep within the bound is
// still refused now and then.
func (c *Client) whileRefused(ctx context.Context, open func() error) error {
	giveUp := time.Now().Add(20 * time.Second)
	backoff := 50 * time.Millisecond
	for {
		err := open()
		var r refused
		if !errors.As(err, &r) {
			return err
		}
		if time.Now().Add(backoff).After(giveUp) {
			return r.error
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), r.error)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// openSession opens a session, waiting while the host refuses it.
func (c *Client) openSession(ctx context.Context) (*gossh.Session, error) {
	var sess *gossh.Session
	err := c.whileRefused(ctx, func() (err error) {
		sess, err = c.conn.NewSession()
		var refused *gossh.OpenChannelError
		return refusedIf(errors.As(err, &refused), err)
	})
	return sess, err
}

// pidMarker starts every command: the shell reports its PID on stderr
// before running the command, and output strips that line. sshd makes the
// shell a session leader, so the PID names the command's process group.
// OpenSSH refuses signal requests in sessions without privilege separation
// (root logins), so cancellation kills that group with kill(1) instead.
const pidMarker = "homelab-ssh-pid:"

// exec runs cmd in a new session. It is never retried: a command that may
// have run must not run twice.
func (c *Client) exec(ctx context.Context, cmd string, stdin []byte) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{ExitCode: -1}, c.cmdErr(cmd, err)
	}
	if err := c.acquire(ctx); err != nil {
		return Result{ExitCode: -1}, c.cmdErr(cmd, err)
	}
	defer c.releaseSession()
	sess, err := c.openSession(ctx)
	if err != nil {
		return Result{ExitCode: -1}, c.cmdErr(cmd, err)
	}
	defer sess.Close()
	out := &output{headSeen: make(chan struct{})}
	sess.Stdout, sess.Stderr = stdoutWriter{out}, stderrWriter{out}
	if stdin != nil {
		sess.Stdin = bytes.NewReader(stdin)
	}
	if err := sess.Start(fmt.Sprintf("printf '%s%%s\\n' \"$$\" >&2\n%s", pidMarker, cmd)); err != nil {
		return Result{ExitCode: -1}, c.cmdErr(cmd, err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		c.stop(sess, out, done)
		res := out.result()
		res.ExitCode = -1
		return res, c.cmdErr(cmd, ctx.Err())
	}
	res := out.result()
	var ee *gossh.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee) && ee.Signal() != "":
		res.ExitCode = -1
		if n := unix.SignalNum("SIG" + ee.Signal()); n != 0 {
			res.ExitCode = 128 + int(n)
		}
	case errors.As(werr, &ee):
		res.ExitCode = ee.ExitStatus()
	default:
		res.ExitCode = -1
		return res, c.cmdErr(cmd, werr)
	}
	return res, nil
}

// killPatience bounds what a cancelled command's clean-up waits for: its
// shell's PID and the session that kills its group. A loaded host opens
// sessions slowly (CI saw over 5 s), and a command left running is worse
// than a late return; a variable so a test can shorten it.
var killPatience = 20 * time.Second

// stop ends a cancelled command's session, killing its process group where
// the host would not take the signal.
func (c *Client) stop(sess *gossh.Session, out *output, done <-chan error) {
	_ = sess.Signal(gossh.SIGKILL)
	giveUp := time.After(killPatience)
	// A command cancelled as it starts may not have reported its PID yet:
	// its shell prints it first thing, but on a loaded node (CI saw it)
	// that took over a second, and without it the command would be left
	// running.
	exited := false
	select {
	case <-out.headSeen:
	case <-done:
		exited = true
	case <-giveUp:
	}
	if !exited {
		select {
		case <-done:
			exited = true
		default:
		}
	}
	// Only while the shell has not been reported gone: after that its PID
	// may name someone else's processes.
	if pid := out.shellPID(); pid > 0 && !exited {
		c.killGroup(pid, giveUp)
	}
	sess.Close()
	if !exited {
		// Give the output that was in flight a moment to arrive.
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
}

// killGroup kills a process group from a session of its own. It is never
// itself killed on time-out, only abandoned: a kill that outlived its
// patience and then killed its own killer would wait once more for a
// session on the host that had just been too slow to give one.
func (c *Client) killGroup(pid int, giveUp <-chan time.Time) {
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		sess, err := c.openSession(ctx)
		if err != nil {
			return
		}
		defer sess.Close()
		// A late session must not kill: by now the PID may be reused.
		if ctx.Err() == nil {
			_ = sess.Run(killGroupScript(pid).String())
		}
	}()
	select {
	case <-killed:
	case <-giveUp:
	}
}

type killArgs struct{ PID int }

func killGroupScript(pid int) scripts.Script {
	return scripts.Render("transport/kill-group", killArgs{PID: pid})
}

// output collects a session's stdout and stderr. It is locked because the
// session copies them on two goroutines and a cancelled exec reads them
// while those may still run.
type output struct {
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	head           []byte // stderr until its first newline, which may be the PID line
	headDone       bool
	pid            int
	headSeen       chan struct{} // closed once the first stderr line is in
}

type stdoutWriter struct{ *output }

func (w stdoutWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stdout.Write(p)
}

type stderrWriter struct{ *output }

func (w stderrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if !w.headDone {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.head = append(w.head, p...)
			if len(w.head) > 64 {
				w.endHead()
			}
			return n, nil
		}
		w.head = append(w.head, p[:i+1]...)
		p = p[i+1:]
		w.endHead()
	}
	w.stderr.Write(p)
	return n, nil
}

// endHead takes the PID from the first stderr line, or passes that line on
// when it is not the marker (the shell failed before printing it).
func (o *output) endHead() {
	o.headDone = true
	close(o.headSeen)
	line, ok := bytes.CutPrefix(o.head, []byte(pidMarker))
	if ok {
		if pid, err := strconv.Atoi(string(bytes.TrimSuffix(line, []byte("\n")))); err == nil {
			o.pid = pid
			o.head = nil
			return
		}
	}
	o.stderr.Write(o.head)
	o.head = nil
}

func (o *output) shellPID() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pid
}

func (o *output) result() Result {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.headDone {
		o.endHead()
	}
	return Result{Stdout: bytes.Clone(o.stdout.Bytes()), Stderr: bytes.Clone(o.stderr.Bytes())}
}

func (c *Client) cmdErr(cmd string, err error) error {
	return fmt.Errorf("ssh %s: %s: %w", c.node, brief(cmd), err)
}

// brief shortens a command (often a whole script) for an error message.
func brief(cmd string) string {
	first, _, more := strings.Cut(strings.TrimSpace(cmd), "\n")
	if len(first) > 80 {
		first, more = first[:80], true
	}
	if more {
		first += " …"
	}
	return strconv.Quote(first)
}

func checkPath(p string) error {
	if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q is not an absolute path", p)
	}
	return nil
}

// Upload implements Executor. The content goes to a temporary file created
// 0600, so a secret is never readable by others on its way to its mode.
func (c *Client) Upload(ctx context.Context, p string, content []byte, mode os.FileMode) error {
	if err := checkPath(p); err != nil {
		return fmt.Errorf("ssh %s: upload: %w", c.node, err)
	}
	// go-scp puts the remote path in double quotes, where a shell still
	// expands $, ` and \.
	if strings.ContainsAny(p, "\"$`\\\n\r") || p == "/" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("ssh %s: upload: %q: a file path may not end in / nor contain \", $, `, \\ or line breaks", c.node, p)
	}
	if err := c.record("upload", true, p); err != nil {
		return err
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	dir := path.Dir(p)
	tmp := path.Join(dir, "."+path.Base(p)+".homelab-"+hex.EncodeToString(suffix[:]))

	prepare := uploadPrepare(p)
	if err := c.must(ctx, "upload "+p, prepare.String()); err != nil {
		return err
	}
	sc, _ := scp.NewClientBySSH(c.conn) // never Closed: that would close c.conn
	if err := c.acquire(ctx); err != nil {
		return fmt.Errorf("ssh %s: upload %s: %w", c.node, p, err)
	}
	err := c.whileRefused(ctx, func() error {
		err := sc.Copy(ctx, bytes.NewReader(content), tmp, "0600", int64(len(content)))
		// go-scp keeps only the text of NewSession's error, under this
		// prefix; its session never started, so nothing was written.
		return refusedIf(err != nil && strings.HasPrefix(err.Error(), "Error creating ssh session"), err)
	})
	c.releaseSession()
	if err != nil {
		c.removeAfter(ctx, tmp)
		return fmt.Errorf("ssh %s: upload %s: %w", c.node, p, err)
	}
	finish := uploadFinish(p, tmp, mode)
	if err := c.must(ctx, "upload "+p, finish.String()); err != nil {
		c.removeAfter(ctx, tmp)
		return err
	}
	return nil
}

// removeAfter removes a leftover temporary file even when ctx was what
// interrupted the upload.
func (c *Client) removeAfter(ctx context.Context, tmp string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.exec(ctx, uploadDiscard(tmp).String(), nil)
}

// uploadArgs are the upload scripts' values: the file's directory, path,
// temporary name and mode bits (octal).
type uploadArgs struct{ Dir, Path, Tmp, Mode string }

func uploadPrepare(p string) scripts.Script {
	return scripts.Render("transport/upload-prepare", uploadArgs{Dir: path.Dir(p), Path: p})
}

func uploadFinish(p, tmp string, mode os.FileMode) scripts.Script {
	return scripts.Render("transport/upload-finish", uploadArgs{Path: p, Tmp: tmp, Mode: fmt.Sprintf("%04o", modeBits(mode))})
}

func uploadDiscard(tmp string) scripts.Script {
	return scripts.Render("transport/upload-discard", uploadArgs{Tmp: tmp})
}

// must runs an internal step of a recorded action; a non-zero exit is an
// error carrying its stderr.
func (c *Client) must(ctx context.Context, what, cmd string) error {
	res, err := c.exec(ctx, cmd, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("ssh %s: %s: exit %d: %s", c.node, what, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

func modeBits(m os.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// notExistStatus is how the read script says the file is absent; cat
// itself only ever exits 0 or 1.
const notExistStatus = 44

type readArgs struct {
	Path    string
	Missing int
}

func readScript(p string) scripts.Script {
	return scripts.Render("transport/read", readArgs{Path: p, Missing: notExistStatus})
}

// Read implements Executor.
func (c *Client) Read(ctx context.Context, p string) ([]byte, error) {
	if err := checkPath(p); err != nil {
		return nil, fmt.Errorf("ssh %s: read: %w", c.node, err)
	}
	if err := c.record("read", false, p); err != nil {
		return nil, err
	}
	res, err := c.exec(ctx, readScript(p).String(), nil)
	if err != nil {
		return nil, err
	}
	switch res.ExitCode {
	case 0:
		return res.Stdout, nil
	case notExistStatus:
		return nil, &fs.PathError{Op: "ssh read", Path: c.node + ":" + p, Err: fs.ErrNotExist}
	}
	return nil, &fs.PathError{Op: "ssh read", Path: c.node + ":" + p,
		Err: fmt.Errorf("exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))}
}
