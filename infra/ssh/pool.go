package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// PoolSessions is how many commands a pooled connection runs at once.
// OpenSSH refuses a session beyond MaxSessions (10 by default) on one
// connection; the rest wait for a turn rather than fail.
const PoolSessions = 8

// Pool shares one connection per machine among the callers of a process.
// A Pulumi provider serves every resource of an up from one process, and
// each resource used to make its own handshake: a no-op refresh of seven
// nodes made over a hundred, each a key exchange and an sshd child on the
// node, and past sshd's MaxStartups (10 unauthenticated at once) some were
// dropped and retried.
//
// A pooled connection is to the machine its handshake verified: a
// replaced machine or a new address is another connection (the old one
// breaks with its machine, and a broken one is dropped from the pool).
type Pool struct {
	idle  time.Duration
	base  []Option
	mu    sync.Mutex
	conns map[string]*shared
}

// shared is one pooled connection and who holds it.
type shared struct {
	ready chan struct{} // closed once the dial ended
	c     *Client
	err   error
	users int
	timer *time.Timer // closes the connection once it has been idle
}

// NewPool makes a pool that closes a connection once nobody has held it
// for idle, and dials every connection with base (before a Dial's own
// options): one pool reaches its machines one way (one namespace, one
// command log).
func NewPool(idle time.Duration, base ...Option) *Pool {
	return &Pool{idle: idle, base: base, conns: map[string]*shared{}}
}

// poolKey is who connects where and how: the same machine reached with
// another key, user or known_hosts is another connection.
func poolKey(t Target) string {
	key := sha256.Sum256(t.PrivateKey)
	return net.JoinHostPort(t.Address, strconv.Itoa(t.port())) + "|" + t.User + "|" +
		hex.EncodeToString(key[:8]) + "|" + t.KnownHosts
}

// Dial returns a connection to t: the pool's, or one it dials with opts
// (which therefore apply to a new connection only). Callers that ask while
// a dial is under way wait for it and share its outcome, failure included:
// a node that is down is not dialled once per caller. Close on what it
// returns lets go of the connection, which stays open for the next caller.
func (p *Pool) Dial(ctx context.Context, t Target, opts ...Option) (Executor, error) {
	key := poolKey(t)
	for {
		p.mu.Lock()
		s := p.conns[key]
		if s == nil {
			s = &shared{ready: make(chan struct{})}
			p.conns[key] = s
			p.mu.Unlock()
			c, err := Dial(ctx, t, append(slices.Clone(p.base), opts...)...)
			if err == nil {
				c.sessions = make(chan struct{}, PoolSessions)
			}
			p.mu.Lock()
			s.c, s.err = c, err
			close(s.ready)
			if err != nil {
				delete(p.conns, key)
				p.mu.Unlock()
				return nil, err
			}
			go p.forgetWhenBroken(key, s)
		} else {
			p.mu.Unlock()
			select {
			case <-s.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if s.err != nil {
				return nil, s.err
			}
			p.mu.Lock()
		}
		if p.conns[key] != s {
			// Broken, or closed for idleness, meanwhile: dial again.
			p.mu.Unlock()
			continue
		}
		s.users++
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		p.mu.Unlock()
		return &lease{Client: s.c, release: func() { p.release(key, s) }}, nil
	}
}

// DialFresh dials t anew with the pool's options and opts, outside the
// pool: for a caller that must know the machine answers a new connection
// now (a changed network configuration), which a pooled one opened
// before the change cannot tell. Close closes it.
func (p *Pool) DialFresh(ctx context.Context, t Target, opts ...Option) (Executor, error) {
	return Dial(ctx, t, append(slices.Clone(p.base), opts...)...)
}

func (p *Pool) release(key string, s *shared) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.users--
	if s.users > 0 || p.conns[key] != s {
		return
	}
	s.timer = time.AfterFunc(p.idle, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if s.users == 0 && p.conns[key] == s {
			delete(p.conns, key)
			s.c.Close()
		}
	})
}

// forgetWhenBroken drops a connection from the pool once it is gone (the
// machine vanished, keepalives went unanswered): the next caller dials a
// new one, while the holders of the old one see their commands fail.
func (p *Pool) forgetWhenBroken(key string, s *shared) {
	s.c.conn.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[key] == s {
		delete(p.conns, key)
	}
}

// Close closes every pooled connection; commands still running are cut
// off.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, s := range p.conns {
		delete(p.conns, key)
		if s.c != nil {
			s.c.Close()
		}
	}
}

// lease is a caller's hold on a pooled connection: its Close lets go.
type lease struct {
	*Client
	once    sync.Once
	release func()
}

func (l *lease) Close() error {
	l.once.Do(l.release)
	return nil
}
