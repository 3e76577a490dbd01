package netns

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newNetns makes a namespace with loopback up, removed when the test ends.
func newNetns(t *testing.T) string {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root to create a network namespace"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "ip is missing (apt-get install iproute2)"
	}
	if why != "" {
		toolstest.Missing(t, why)
	}
	var b [4]byte
	rand.Read(b[:])
	name := "hlnetns-test-" + hex.EncodeToString(b[:])
	for _, args := range [][]string{{"netns", "add", name}, {"-n", name, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// threadNetns names the network namespace of the calling thread.
func threadNetns(t *testing.T) string {
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDoEntersOnlyItsThread(t *testing.T) {
	name := newNetns(t)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(Dir, name), &st); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadNetns(t)
	var inside string
	if err := Do(name, func() error { inside = threadNetns(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("net:[%d]", st.Ino); inside != want {
		t.Errorf("inside Do: %s, want %s", inside, want)
	}
	if threadNetns(t) != before {
		t.Error("Do moved the caller's thread")
	}
}

func TestDial(t *testing.T) {
	name := newNetns(t)
	var ln net.Listener
	if err := Do(filepath.Join(Dir, name), func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("hello from the namespace\n"))
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := DialerFor(name)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello from the namespace\n" {
		t.Errorf("read %q, %v", line, err)
	}

	if _, err := Dial(ctx, name, "tcp", "localhost:22"); err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("a host name: %v", err)
	}
	if _, err := Dial(ctx, "/run/netns/hlnetns-no-such-namespace", "tcp", "127.0.0.1:22"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing namespace: %v", err)
	}
}
