package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// Connection says how to reach a node. The private key is a secret: Pulumi
// encrypts it in state and never shows it.
type Connection struct {
	Node       string `pulumi:"node"`
	Host       string `pulumi:"host"`
	Port       int    `pulumi:"port,optional"`
	User       string `pulumi:"user,optional"`
	PrivateKey string `pulumi:"privateKey" provider:"secret"`
	// KnownHosts is the known_hosts file host keys are checked against.
	KnownHosts string `pulumi:"knownHosts"`
}

func (c Connection) target() ssh.Target {
	port, user := c.Port, c.User
	if port == 0 {
		port = 22
	}
	if user == "" {
		user = "root"
	}
	return ssh.Target{Name: c.Node, Address: c.Host, Port: port, User: user, PrivateKey: []byte(c.PrivateKey), KnownHosts: c.KnownHosts}
}

type readingKey struct{}

// reading marks ctx as a refresh's read. A read gives an unanswering node
// a short retry window, not a rebooting node's: it keeps the last known
// state either way, and a node that moved or is off would otherwise hold
// every refresh for the full window.
func reading(ctx context.Context) context.Context { return context.WithValue(ctx, readingKey{}, true) }

type freshKey struct{}

// fresh marks ctx so the node is dialled anew, not through the pool.
func fresh(ctx context.Context) context.Context { return context.WithValue(ctx, freshKey{}, true) }

// readRetry is how long a read retries a node that does not answer.
const readRetry = 3 * time.Second

// A dialer opens an Executor on the node c names. Every step reaches its
// nodes through one, so a unit test can hand the steps fake nodes.
type dialer func(ctx context.Context, c Connection) (ssh.Executor, error)

// sshDialer reaches real nodes through pool: SSH with the host key
// checked against the connection's known_hosts, recorded in the command
// log, from the namespace ssh.NetnsEnv names (the pool's options).
func sshDialer(pool *ssh.Pool) dialer {
	return func(ctx context.Context, c Connection) (ssh.Executor, error) {
		var opts []ssh.Option
		if ctx.Value(readingKey{}) != nil {
			opts = append(opts, ssh.WithRetry(readRetry))
		}
		if ctx.Value(freshKey{}) != nil {
			return pool.DialFresh(ctx, c.target(), opts...)
		}
		return pool.Dial(ctx, c.target(), opts...)
	}
}

// dial reaches the node c names through the run's dialer.
func dial(ctx context.Context, c Connection) (ssh.Executor, error) {
	ex, err := configOf(ctx).dial(ctx, c)
	var changed *ssh.HostKeyChangedError
	if errors.As(err, &changed) {
		return nil, fmt.Errorf("%w. To accept the new key once you have checked it: homelab hosts accept %s -f INVENTORY", err, c.Node)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Node, err)
	}
	return ex, nil
}

// eachNode runs f on every connection at once and returns what each
// returned, in the connections' order: nodes answer independently, and a
// read of seven nodes one after another made every refresh wait for the
// sum of their SSH round trips.
func eachNode[T any](conns []Connection, f func(Connection) T) []T {
	out := make([]T, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f(c)
		}()
	}
	wg.Wait()
	return out
}

// tokenPattern matches kubeadm bootstrap tokens, which kubeadm prints in
// some failures: they must never reach Pulumi's logs.
var tokenPattern = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)

func redact(s string) string { return tokenPattern.ReplaceAllString(s, "<redacted-token>") }

// must runs a mutating command and turns a non-zero exit into an error
// carrying the (redacted) output.
func must(ctx context.Context, c ssh.Executor, node, what string, s scripts.Script) (string, error) {
	r, err := c.Run(ctx, s.String())
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", node, what, err)
	}
	if r.ExitCode != 0 {
		return "", fmt.Errorf("%s: %s failed (exit %d):\n%s", node, what, r.ExitCode, tail(redact(string(r.Stdout)+string(r.Stderr)), 40))
	}
	return string(r.Stdout), nil
}

// mustAPI is must for an idempotent kubectl command that changes the
// cluster (approve, label, delete --ignore-not-found): run again while
// the endpoint blips, since a moment without an apiserver behind the VIP
// is what a control-plane node joining or restarting looks like, and it
// failed a whole up once (CI, on real nodes, in a test since folded into
// TestUpInTheLab: an approval met a TLS handshake timeout while cp-3
// joined).
func mustAPI(ctx context.Context, c ssh.Executor, node, what string, s scripts.Script) (string, error) {
	r, err := outliveBlips(ctx, func() (ssh.Result, error) { return c.Run(ctx, s.String()) })
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", node, what, err)
	}
	if r.ExitCode != 0 {
		return "", fmt.Errorf("%s: %s failed (exit %d):\n%s", node, what, r.ExitCode, tail(redact(string(r.Stdout)+string(r.Stderr)), 40))
	}
	return string(r.Stdout), nil
}

// query runs a read-only command; the exit code is the caller's business.
func query(ctx context.Context, c ssh.Executor, s scripts.Script) (string, int, error) {
	r, err := c.Query(ctx, s.String())
	if err != nil {
		return "", 0, err
	}
	return string(r.Stdout), r.ExitCode, nil
}

// queryAPI runs a read-only kubectl command; a non-zero exit is an
// *apiRefused carrying kubectl's reason.
func queryAPI(ctx context.Context, c ssh.Executor, s scripts.Script) (string, error) {
	r, err := c.Query(ctx, s.String())
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 {
		return "", &apiRefused{code: r.ExitCode, reason: tail(strings.TrimSpace(redact(string(r.Stderr))), 1)}
	}
	return string(r.Stdout), nil
}

// apiRefused is a kubectl command that exited non-zero: the API did not
// answer, or refused, and reason (kubectl's last line of stderr) says why
// ("x509: certificate has expired or is not yet valid", "Unauthorized").
type apiRefused struct {
	code   int
	reason string
}

func (e *apiRefused) Error() string { return fmt.Sprintf("kubectl exit %d: %s", e.code, e.reason) }

// endpointBlip says whether kubectl's stderr is the endpoint not
// answering for a moment rather than a refusal: the apiserver behind the
// VIP restarting (a rolling manifest change in the same up), or the VIP
// moving between keepalived instances. A retry outlives it; a join that
// failed on it once failed a whole up (CI, TestAdoptHandBuiltCluster).
func endpointBlip(stderr string) bool {
	for _, s := range []string{"was refused", "connection reset by peer", "i/o timeout", "TLS handshake timeout",
		"no route to host", "unexpected EOF", "http2: client connection lost", "the server is currently unable to handle the request"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// outliveBlips runs an idempotent kubectl command (run), again while it
// fails with an endpointBlip, until the probes' timeout; then its last
// result is the caller's to judge.
func outliveBlips(ctx context.Context, run func() (ssh.Result, error)) (ssh.Result, error) {
	pr := configOf(ctx).probes
	deadline := time.Now().Add(pr.timeout)
	for {
		r, err := run()
		if err != nil || r.ExitCode == 0 || !endpointBlip(string(r.Stderr)) || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(pr.poll):
		}
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// currentVia is the connection to reach the cluster through: the latest
// inputs' whenever they have one. Through which node the cluster is
// reached is a means, not a property of the resource: Diff does not show
// it as a change (a reordered inventory has another first node), so the
// state may hold an older one, while the engine hands Read the latest
// inputs even when nothing changed.
func currentVia(state, inputs Connection) Connection {
	if inputs.Host != "" {
		return inputs
	}
	return state
}
