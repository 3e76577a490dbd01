package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSH connects to a node with the lab's client key, the host key checked
// against the lab's own record of it (which follows replaced machines),
// through the gateway namespace.
func (l *Lab) SSH(ctx context.Context, node string) (*ssh.Client, error) {
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	n, err := s.Node(node)
	if err != nil {
		return nil, err
	}
	return l.sshClient(ctx, s, n)
}

func (l *Lab) sshClient(ctx context.Context, s *State, n *NodeState) (*ssh.Client, error) {
	d, err := s.Dialer()
	if err != nil {
		return nil, err
	}
	signer, err := l.Signer()
	if err != nil {
		return nil, err
	}
	hostKeys, err := knownhosts.New(l.labKnownHostsPath())
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(n.Address, strconv.Itoa(s.SSHPort))
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	cfg := &ssh.ClientConfig{
		User:            s.SSHUser,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys,
		// Only the algorithm the lab wrote into known_hosts, or a client
		// offered several would fail on the first other key it is shown.
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           10 * time.Second,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s (%s): %w", n.Name, addr, err)
	}
	// The handshake's deadline must not cut long commands short.
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// Run runs a command on a node over SSH and returns its combined output.
func (l *Lab) Run(ctx context.Context, node, cmd string) (string, error) {
	c, err := l.SSH(ctx, node)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return RunOn(ctx, c, cmd)
}

// RunOn runs a command in a new session of an SSH client.
func RunOn(ctx context.Context, c *ssh.Client, cmd string) (string, error) {
	sess, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	// stdout and stderr are copied by two goroutines: one buffer, one lock.
	out := &SyncBuffer{}
	sess.Stdout = out
	sess.Stderr = out
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		err = ctx.Err()
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// SyncBuffer is a buffer two goroutines may write at once (a command's
// stdout and stderr, copied separately).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
