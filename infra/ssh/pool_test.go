package ssh

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/netns"
)

func pooled(t *testing.T, p *Pool, e *env, knownHosts string) Executor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ex, err := p.Dial(ctx, e.target(port, knownHosts), WithDialer(netns.DialerFor(e.ns)), WithRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// poolWithSSHD gives a namespace with an sshd, its known_hosts and a pool
// closed with the test.
func poolWithSSHD(t *testing.T, idle time.Duration) (*env, string, *Pool) {
	e := newEnv(t)
	hk := newEd25519(t)
	e.startSSHD(port, hk)
	p := NewPool(idle)
	t.Cleanup(p.Close)
	return e, e.knownHosts(port, pub(t, hk)), p
}

func clientOf(ex Executor) *Client { return ex.(*lease).Client }

func TestPoolSharesAndClosesWhenIdle(t *testing.T) {
	e, kh, p := poolWithSSHD(t, 300*time.Millisecond)

	a, b := pooled(t, p, e, kh), pooled(t, p, e, kh)
	if clientOf(a) != clientOf(b) {
		t.Fatal("two callers for one machine got two connections")
	}
	a.Close()
	a.Close() // a second Close must not let go of b's hold
	time.Sleep(600 * time.Millisecond)
	if res, err := b.Query(context.Background(), "echo held"); err != nil || string(res.Stdout) != "held\n" {
		t.Fatalf("a held connection was closed while idle: %q, %v", res.Stdout, err)
	}
	b.Close()
	time.Sleep(600 * time.Millisecond)
	select {
	case <-clientOf(b).closed:
	default:
		t.Error("a connection nobody held for the idle time stayed open")
	}
	c := pooled(t, p, e, kh)
	defer c.Close()
	if clientOf(c) == clientOf(b) {
		t.Error("a caller after the idle close got the closed connection")
	}
	if res, err := c.Query(context.Background(), "echo new"); err != nil || string(res.Stdout) != "new\n" {
		t.Errorf("the new connection: %q, %v", res.Stdout, err)
	}
}

// More commands at once than sshd's MaxSessions (10) allows on one
// connection: they take turns instead of being refused. (Sessions start
// slowly in this harness's namespace, about a second each, so twelve.)
func TestPoolBoundsSessions(t *testing.T) {
	e, kh, p := poolWithSSHD(t, time.Minute)
	ex := pooled(t, p, e, kh)
	defer ex.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				if err := ex.Upload(context.Background(), fmt.Sprintf("%s/f%d", e.dir, i), []byte("x"), 0o600); err != nil {
					errs <- err
				}
				return
			}
			res, err := ex.Query(context.Background(), fmt.Sprintf("echo %d", i))
			if err == nil && strings.TrimSpace(string(res.Stdout)) != fmt.Sprint(i) {
				err = fmt.Errorf("command %d printed %q", i, res.Stdout)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A connection that broke (its machine went away) is not handed out
// again; the next caller dials a new one.
func TestPoolForgetsBrokenConnection(t *testing.T) {
	e, kh, p := poolWithSSHD(t, time.Minute)
	a := pooled(t, p, e, kh)
	clientOf(a).conn.Close()
	if _, err := a.Query(context.Background(), "true"); err == nil {
		t.Fatal("a command on a closed connection succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b := pooled(t, p, e, kh)
		if clientOf(b) != clientOf(a) {
			if res, err := b.Query(context.Background(), "echo again"); err != nil || string(res.Stdout) != "again\n" {
				t.Errorf("after the break: %q, %v", res.Stdout, err)
			}
			b.Close()
			break
		}
		b.Close()
		if time.Now().After(deadline) {
			t.Fatal("the broken connection was still handed out after 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.Close()
}

// Callers that arrive while a dial to an unreachable machine is under way
// share its failure instead of dialling one after another.
func TestPoolSharesFailedDial(t *testing.T) {
	e := newEnv(t) // no sshd: refused
	kh := e.knownHosts(port)
	p := NewPool(time.Minute)
	defer p.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if ex, err := p.Dial(ctx, e.target(port, kh), WithDialer(netns.DialerFor(e.ns)), WithRetry(0)); err == nil {
				ex.Close()
				t.Error("a dial to a machine without sshd succeeded")
			}
		}()
	}
	wg.Wait()
	if len(p.conns) != 0 {
		t.Errorf("the pool kept %d failed connections", len(p.conns))
	}
}
