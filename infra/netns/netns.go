// Package netns dials from inside a Linux network namespace without moving
// the process into it.
//
// Only the calling OS thread can join a namespace, and a socket belongs to
// the namespace of the thread that created it. So each call runs on a fresh,
// locked thread that is never unlocked: Go then ends that thread with its
// goroutine instead of handing a thread in the wrong namespace to other
// goroutines.
package netns

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps named namespaces (`ip netns add NAME`).
const Dir = "/run/netns"

// resolve turns a bare name such as "hl-gw" into its path under Dir, so
// callers can pass either what `ip netns list` prints or a full path.
func resolve(nsPath string) string {
	if !strings.ContainsRune(nsPath, '/') {
		return filepath.Join(Dir, nsPath)
	}
	return nsPath
}

// Do runs fn on an OS thread that has joined the network namespace at
// nsPath (a path such as /run/netns/hl-gw, or a bare name under Dir).
// Sockets that fn creates live in that namespace; goroutines that fn starts
// do not (they run on other threads).
func Do(nsPath string, fn func() error) error {
	p := resolve(nsPath)
	errc := make(chan error, 1)
	go func() {
		// Deliberately never unlocked; see the package comment.
		runtime.LockOSThread()
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("network namespace %s: %w", p, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", p, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Dial connects to addr from inside the network namespace at nsPath.
//
// addr's host must be an IP literal: a name lookup would run on other
// threads, in this process's namespace and against its resolver, so it could
// resolve to, and then leak traffic towards, the wrong network.
func Dial(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netns dial %s: %w", addr, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("netns dial %s: %q is not an IP address (names are not resolved inside a namespace)", addr, host)
	}
	var conn net.Conn
	err = Do(nsPath, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	return conn, err
}

// DialerFor returns Dial bound to one namespace, in the shape that
// x/crypto/ssh, grpc.WithContextDialer and client-go's rest.Config.Dial take.
func DialerFor(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return Dial(ctx, nsPath, network, addr)
	}
}
