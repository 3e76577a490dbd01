package ssh

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/homelab-dev/homelab/infra/netns"
)

const port = 2222

// started gives a namespace, an sshd with an ed25519 host key, and a client.
func started(t *testing.T, opts ...Option) (*env, *Client) {
	e := newEnv(t)
	hk := newEd25519(t)
	e.startSSHD(port, hk)
	return e, e.dial(port, e.knownHosts(port, pub(t, hk)), opts...)
}

func TestRun(t *testing.T) {
	_, c := started(t)
	ctx := context.Background()

	res, err := c.Run(ctx, "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("got stdout %q, stderr %q, exit %d; want \"out\\n\", \"err\\n\", 3", res.Stdout, res.Stderr, res.ExitCode)
	}

	// Without input, stdin is at end of file rather than left open.
	res, err = c.Query(ctx, "cat; echo ok")
	if err != nil || string(res.Stdout) != "ok\n" || res.ExitCode != 0 {
		t.Errorf("Query(cat): %q, exit %d, %v", res.Stdout, res.ExitCode, err)
	}

	res, err = c.Run(ctx, "kill -TERM $$")
	if err != nil || res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("a command killed by TERM: exit %d, %v; want %d", res.ExitCode, err, 128+int(syscall.SIGTERM))
	}
}

func TestRunInput(t *testing.T) {
	_, c := started(t)
	in := []byte("line one\nline two\x00binary\n")
	res, err := c.RunInput(context.Background(), "cat; echo done >&2", in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Stdout, in) || string(res.Stderr) != "done\n" || res.ExitCode != 0 {
		t.Errorf("got %q / %q / %d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func TestUploadAndRead(t *testing.T) {
	_, c := started(t)
	ctx := context.Background()
	// sshd runs on this machine's file system, so the test can look at what
	// the upload left directly.
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b c", "it's.conf")
	content := []byte("first\x00version\n")
	if err := c.Upload(ctx, p, content, 0o640); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %o, want 640", fi.Mode().Perm())
	}
	got, err := c.Read(ctx, p)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("Read: %q, %v; want %q", got, err, content)
	}

	// A second upload replaces the file by rename: a new inode, and readers
	// holding the old file see it whole.
	before := inode(t, p)
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := c.Upload(ctx, p, []byte("second"), 0o600|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if inode(t, p) == before {
		t.Error("the file was rewritten in place, not replaced by a rename")
	}
	if b, _ := os.ReadFile(p); string(b) != "second" {
		t.Errorf("after the second upload: %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode()&(os.ModePerm|os.ModeSetgid) != 0o600|os.ModeSetgid {
		t.Errorf("mode %v, want g+s and 0600", fi.Mode())
	}
	var buf bytes.Buffer
	buf.ReadFrom(old)
	if !bytes.Equal(buf.Bytes(), content) {
		t.Errorf("a reader of the old file saw %q", buf.Bytes())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	if err := c.Upload(ctx, p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Read(ctx, p); err != nil || len(b) != 0 {
		t.Errorf("empty upload read back as %q, %v", b, err)
	}

	if err := c.Upload(ctx, filepath.Join(dir, "a"), []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("upload over a directory: %v", err)
	}
	if err := c.Upload(ctx, "relative/path", []byte("x"), 0o644); err == nil {
		t.Error("upload to a relative path succeeded")
	}

	_, err = c.Read(ctx, filepath.Join(dir, "absent"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := c.Read(ctx, dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a directory: %v, want an error other than not-exist", err)
	}
}

func inode(t *testing.T, p string) uint64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestUnknownHost(t *testing.T) {
	e := newEnv(t)
	hk := newEd25519(t)
	e.startSSHD(port, hk)
	other := newEd25519(t)
	// known_hosts knows another host, not this one.
	kh := e.knownHosts(port+1, pub(t, other))
	_, err := e.tryDial(port, kh)
	var u *UnknownHostError
	if !errors.As(err, &u) {
		t.Fatalf("got %v, want *UnknownHostError", err)
	}
	if u.Got != gossh.FingerprintSHA256(pub(t, hk)) || u.Host != "[127.0.0.1]:2222" || u.KnownHosts != kh {
		t.Errorf("error fields: %+v", u)
	}
	t.Log(err)

	if _, err := e.tryDial(port, filepath.Join(e.dir, "no-such-file")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing known_hosts file: %v", err)
	}
	if _, err := e.tryDial(port, ""); err == nil {
		t.Error("dialed without a known_hosts file")
	}
}

func TestChangedHostKey(t *testing.T) {
	e := newEnv(t)
	oldKey := newEd25519(t)
	s := e.startSSHD(port, oldKey)
	kh := e.knownHosts(port, pub(t, oldKey))
	e.dial(port, kh).Close()

	// The machine is reinstalled: sshd comes back with a new key.
	s.stop()
	newKey := newEd25519(t)
	e.startSSHD(port, newKey)
	_, err := e.tryDial(port, kh)
	var ch *HostKeyChangedError
	if !errors.As(err, &ch) {
		t.Fatalf("got %v, want *HostKeyChangedError", err)
	}
	if ch.Got != gossh.FingerprintSHA256(pub(t, newKey)) || len(ch.Want) != 1 || ch.Want[0] != gossh.FingerprintSHA256(pub(t, oldKey)) {
		t.Errorf("error fields: %+v", ch)
	}
	for _, s := range []string{"CHANGED", "attack", "hardware", "ssh-keygen -R '[127.0.0.1]:2222' -f '" + kh + "'"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q: %v", s, err)
		}
	}
	t.Log(err)

	// Rekeyed with a type known_hosts has no line for: still a change,
	// reported with the key the host has now.
	kh2 := e.knownHosts(port, pub(t, newECDSA(t)))
	_, err = e.tryDial(port, kh2)
	if !errors.As(err, &ch) || ch.GotType != gossh.KeyAlgoED25519 || ch.Got != gossh.FingerprintSHA256(pub(t, newKey)) {
		t.Fatalf("rekeyed with another type: %v", err)
	}
}

func TestHostWithSeveralKeys(t *testing.T) {
	e := newEnv(t)
	ed, ec := newEd25519(t), newECDSA(t)
	e.startSSHD(port, ed, ec)
	// x/crypto prefers ECDSA: unless the client offers only what
	// known_hosts has, the host shows its ECDSA key and fails the check.
	for name, keys := range map[string][]gossh.PublicKey{
		"ed25519 only":      {pub(t, ed)},
		"ecdsa only":        {pub(t, ec)},
		"both":              {pub(t, ec), pub(t, ed)},
		"ed25519 and stale": {pub(t, ed), pub(t, newEd25519(t))},
	} {
		c, err := e.tryDial(port, e.knownHosts(port, keys...))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c.Close()
	}
}

func TestAuditLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "commands.jsonl")
	var mu sync.Mutex
	var events []Event
	_, c := started(t, WithCommandLog(logPath), WithAudit(func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }))
	ctx := context.Background()
	const secret = "s3cr3t-token-0xDEADBEEF"
	file := filepath.Join(t.TempDir(), "etc", "join.conf")

	if _, err := c.Run(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "uname -a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunInput(ctx, "cat >/dev/null", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Read(ctx, file); err != nil || string(b) != secret {
		t.Fatalf("Read: %q, %v", b, err)
	}
	if err := c.Note("etcd member remove 8e9e05c52164694d cp-3"); err != nil {
		t.Fatal(err)
	}

	want := []Event{
		{Node: "test-node", Kind: "run", Mutating: true, Cmd: "true"},
		{Node: "test-node", Kind: "run", Mutating: false, Cmd: "uname -a"},
		{Node: "test-node", Kind: "run", Mutating: true, Cmd: "cat >/dev/null"},
		{Node: "test-node", Kind: "upload", Mutating: true, Cmd: file},
		{Node: "test-node", Kind: "read", Mutating: false, Cmd: file},
		{Node: "test-node", Kind: "tunnel", Mutating: true, Cmd: "etcd member remove 8e9e05c52164694d cp-3"},
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Errorf("the command log holds a secret:\n%s", raw)
	}
	var logged []Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		logged = append(logged, e)
	}
	for name, got := range map[string][]Event{"log file": logged, "WithAudit": events} {
		if len(got) != len(want) {
			t.Errorf("%s: %d events, want %d: %+v", name, len(got), len(want), got)
			continue
		}
		for i := range want {
			if time.Since(got[i].Time) > time.Minute {
				t.Errorf("%s: event %d has time %v", name, i, got[i].Time)
			}
			got[i].Time = time.Time{}
			if got[i] != want[i] {
				t.Errorf("%s: event %d is %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	// The log's keys are part of its contract with other tools.
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	for _, k := range []string{`"time":`, `"node":`, `"kind":`, `"mutating":`, `"cmd":`} {
		if !bytes.Contains(first, []byte(k)) {
			t.Errorf("log line lacks %s: %s", k, first)
		}
	}

}

func TestAuditLogUnwritable(t *testing.T) {
	_, c := started(t, WithCommandLog(filepath.Join(t.TempDir(), "missing-dir", "log")))
	mark := filepath.Join(t.TempDir(), "mark")
	if _, err := c.Run(context.Background(), "touch "+mark); err == nil {
		t.Error("a command ran although the command log could not be written")
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the unrecorded command ran")
	}
	// A change through a tunnel is stopped the same way.
	if err := c.Note("helm apply kube-system/cilium"); err == nil {
		t.Error("Note succeeded although the command log could not be written")
	}
}

func TestCancel(t *testing.T) {
	_, c := started(t)
	const cmd = "sleep 314.159"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Run(ctx, cmd)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	// Within the clean-up's own bound, not the command's 314 s: a bound,
	// not a speed goal (a loaded host opens the kill's session slowly).
	if d := time.Since(start); d > killPatience+10*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	// The remote command is killed, not left running.
	if running(cmd, 10*time.Second) {
		t.Fatal("the remote sleep survived cancellation")
	}
	// The connection survives a cancelled command.
	if res, err := c.Run(context.Background(), "echo still here"); err != nil || string(res.Stdout) != "still here\n" {
		t.Errorf("after cancel: %q, %v", res.Stdout, err)
	}
}

// A host that cannot open the kill's session in time is given up on, once:
// the kill is not itself killed from yet another session, and it does not
// run late, when the PID may name someone else's processes.
func TestCancelOnAFrozenHost(t *testing.T) {
	e := newEnv(t)
	hk := newEd25519(t)
	s := e.startSSHD(port, hk)
	c := e.dial(port, e.knownHosts(port, pub(t, hk)))
	patience := killPatience
	killPatience = 2 * time.Second
	t.Cleanup(func() { killPatience = patience })

	const cmd = "sleep 271.828"
	t.Cleanup(func() { exec.Command("pkill", "-f", cmd).Run() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { _, err := c.Run(ctx, cmd); ran <- err }()
	for !running(cmd, 0) {
		time.Sleep(20 * time.Millisecond)
	}
	// A round trip on the connection, so the shell's PID line, sent
	// before the command ran, is in before the host stops answering.
	if _, err := c.Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	thaw := s.freeze(t)
	start := time.Now()
	cancel()
	var err error
	select {
	case err = <-ran:
	case <-time.After(killPatience + 10*time.Second):
		thaw()
		t.Fatal("cancellation waited on a host that does not answer")
	}
	thaw()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d < killPatience {
		t.Errorf("gave up after %v, before its patience of %v", d, killPatience)
	}
	time.Sleep(time.Second)
	if !running(cmd, 0) {
		t.Error("the abandoned kill ran after all, once the host answered")
	}
	if res, err := c.Run(context.Background(), "echo still here"); err != nil || string(res.Stdout) != "still here\n" {
		t.Errorf("after thaw: %q, %v", res.Stdout, err)
	}
}

// running reports whether a process with cmd in its command line is still
// there after up to wait.
func running(cmd string, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		if exec.Command("pgrep", "-f", cmd).Run() != nil {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
	}
}

// The environment is read where a process starts (OptionsFromEnv), never
// by Dial itself: a connection dialled without those options leaves the
// namespace and the log alone.
func TestOptionsFromEnv(t *testing.T) {
	e := newEnv(t)
	hk := newEd25519(t)
	e.startSSHD(port, hk)
	logPath := filepath.Join(t.TempDir(), "commands.jsonl")
	t.Setenv(NetnsEnv, e.ns)
	t.Setenv(CommandLogEnv, logPath)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	target := e.target(port, e.knownHosts(port, pub(t, hk)))
	c, err := Dial(ctx, target, append(OptionsFromEnv(), WithRetry(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, err := c.Run(ctx, "echo hi"); err != nil || string(res.Stdout) != "hi\n" {
		t.Errorf("%q, %v", res.Stdout, err)
	}
	if data, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(data), "echo hi") {
		t.Errorf("the command log named in the environment: %q, %v", data, err)
	}
	os.Remove(logPath)
	// The node's address exists only in its namespace: from this one,
	// with the environment unread, it cannot be reached.
	if c, err := Dial(ctx, target, WithRetry(0), WithTimeout(2*time.Second)); err == nil {
		c.Close()
		t.Error("Dial read the namespace from the environment")
	}
	if _, err := os.Stat(logPath); err == nil {
		t.Error("Dial read the command log from the environment")
	}
}

func TestDialRetriesAndTimeouts(t *testing.T) {
	e := newEnv(t)
	hk := newEd25519(t)
	kh := e.knownHosts(port, pub(t, hk))

	// Nothing listens yet: without retries, refused at once.
	start := time.Now()
	if _, err := e.tryDial(port, kh); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("got %v, want connection refused", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a refused dial took %v", d)
	}

	// The node comes up while Dial retries.
	up := make(chan struct{})
	go func() {
		time.Sleep(600 * time.Millisecond)
		close(up)
	}()
	done := make(chan error, 1)
	go func() {
		c, err := e.tryDial(port, kh, WithRetry(10*time.Second))
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	<-up
	e.startSSHD(port, hk)
	if err := <-done; err != nil {
		t.Errorf("dial while the node comes up: %v", err)
	}

	// A peer that accepts but never speaks is cut off by the timeout.
	var ln net.Listener
	err := netns.Do(e.ns, func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:2300")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start = time.Now()
	_, err = e.tryDial(2300, kh, WithTimeout(300*time.Millisecond))
	if err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("silent peer: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = Dial(ctx, e.target(2300, kh), WithDialer(netns.DialerFor(e.ns)))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled handshake: %v after %v", err, time.Since(start))
	}
}

func TestDialContext(t *testing.T) {
	e, c := started(t)
	// A service on the node's own loopback, reachable only through SSH.
	var ln net.Listener
	if err := netns.Do(e.ns, func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:2379")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if s, err := ln.Accept(); err == nil {
			s.Write([]byte("etcd says hi\n"))
			s.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.DialContext(ctx, "tcp", "127.0.0.1:2379")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "etcd says hi\n" {
		t.Errorf("read %q, %v", line, err)
	}
}

func TestTargetHidesKey(t *testing.T) {
	tg := Target{Name: "n", Address: "10.0.0.1", User: "root", PrivateKey: []byte("-----BEGIN OPENSSH PRIVATE KEY-----SECRET")}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, tg); strings.Contains(s, "SECRET") {
			t.Errorf("%s shows the key: %s", f, s)
		}
	}
}

// A host that is there, shows the known key, and refuses our key is told
// apart from one that is away: its state cannot be trusted, only re-read.
func TestRefusedKey(t *testing.T) {
	e := newEnv(t)
	hk := newEd25519(t)
	e.startSSHD(port, hk)
	kh := e.knownHosts(port, pub(t, hk))
	c := e.dial(port, kh)
	if c.HostKey() != gossh.FingerprintSHA256(pub(t, hk)) {
		t.Errorf("HostKey %q, want the verified key's fingerprint", c.HostKey())
	}

	other := newEd25519(t)
	block, err := gossh.MarshalPrivateKey(other, "")
	if err != nil {
		t.Fatal(err)
	}
	e.key = pem.EncodeToMemory(block)
	_, err = e.tryDial(port, kh)
	if err == nil || !AuthFailed(err) {
		t.Fatalf("dial with a key sshd does not accept: %v (AuthFailed %v)", err, AuthFailed(err))
	}
	if _, err := e.tryDial(port+7, kh); AuthFailed(err) {
		t.Errorf("an unreachable port counts as a refused key: %v", err)
	}
}
