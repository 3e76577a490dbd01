// Package apttest gives tests a throwaway Debian root in which the real apt
// and dpkg install packages as on a fresh node, without touching this
// machine: its own /etc, /var, /usr and /root under overlays whose writes
// land in a temporary directory, in private mount and network namespaces
// (loopback only, so nothing leaves the machine), with none of the
// machine's apt sources. Needs root, unshare, nsenter and overlayfs.
package apttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// setup runs as the namespaces' first process: overlays on the
// directories apt, dpkg and the packages write to. Every overlay is proved
// to be in place (a marker written to its upper directory shows through)
// before anything is removed, so a failed mount can never reach the
// machine's own files.
const setup = `set -eu
top=$1
for d in etc var usr root; do
  mkdir -p "$top/$d/upper" "$top/$d/work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$top/$d/upper,workdir=$top/$d/work" "/$d"
  touch "$top/$d/upper/.apttest"
  [ -e "/$d/.apttest" ] || { echo "/$d is not the throwaway overlay" >&2; exit 1; }
  rm "/$d/.apttest"
done
rm -rf /etc/apt/sources.list /etc/apt/sources.list.d /etc/apt/preferences.d /var/lib/apt/lists
mkdir -p /etc/apt/sources.list.d /etc/apt/preferences.d /var/lib/apt/lists/partial
ip link set lo up
echo ready > "$top/ready"
exec sleep infinity
`

// Root is one throwaway root.
type Root struct {
	t      testing.TB
	dir    string
	holder *exec.Cmd
}

// New makes a throwaway root, skipping the test where one cannot be made
// (not root, no unshare).
func New(t testing.TB) *Root {
	t.Helper()
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "a throwaway apt root needs root (mount and network namespaces, overlayfs)")
	}
	for _, p := range []string{"unshare", "nsenter", "apt-get", "dpkg", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			toolstest.Missing(t, fmt.Sprintf("a throwaway apt root needs %s: %v", p, err))
		}
	}
	r := &Root{t: t, dir: t.TempDir()}
	r.holder = exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--fork", "--kill-child", "--", "sh", "-c", setup, "sh", r.dir)
	var out bytes.Buffer
	r.holder.Stdout, r.holder.Stderr = &out, &out
	r.holder.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := r.holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.holder.Wait() }()
	t.Cleanup(func() {
		// unshare --fork ignores SIGTERM; --kill-child takes the rest.
		r.holder.Process.Kill()
		<-done
	})
	deadline := time.After(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(r.dir, "ready")); err == nil {
			return r
		}
		select {
		case err := <-done:
			t.Fatalf("the throwaway root did not come up: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the throwaway root did not come up in 20s\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NetnsPath is the root's network namespace.
func (r *Root) NetnsPath() string {
	return "/proc/" + strconv.Itoa(r.holder.Process.Pid) + "/ns/net"
}

// Run runs a shell command in the root, as an SSH session on a node
// would: a login-like environment, the working directory /.
func (r *Root) Run(ctx context.Context, cmd string, stdin []byte) (ssh.Result, error) {
	c := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(r.holder.Process.Pid), "--mount", "--net", "--", "sh", "-c", "cd / && "+cmd)
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "USER=root"}
	c.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	res := ssh.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
		return res, nil
	}
	return res, err
}

// Sh runs cmd and fails the test unless it exits 0; it returns stdout.
func (r *Root) Sh(cmd string) string {
	r.t.Helper()
	res, err := r.Run(context.Background(), cmd, nil)
	if err != nil || res.ExitCode != 0 {
		r.t.Fatalf("%s: exit %d, %v\n%s%s", cmd, res.ExitCode, err, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// Forget makes the root as fresh as a new node for the named packages:
// its dpkg database (this machine's) no longer lists them.
func (r *Root) Forget(names ...string) {
	r.t.Helper()
	ex := r.Executor()
	status, err := ex.Read(context.Background(), dpkgStatus)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := ex.Upload(context.Background(), dpkgStatus, aptrepo.Forget(status, names...), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

const dpkgStatus = "/var/lib/dpkg/status"

// Executor is the root as the provider reaches a node.
func (r *Root) Executor() ssh.Executor { return executor{r} }

type executor struct{ r *Root }

func (e executor) Run(ctx context.Context, cmd string) (ssh.Result, error) {
	return e.r.Run(ctx, cmd, nil)
}
func (e executor) Query(ctx context.Context, cmd string) (ssh.Result, error) {
	return e.r.Run(ctx, cmd, nil)
}
func (e executor) RunInput(ctx context.Context, cmd string, stdin []byte) (ssh.Result, error) {
	return e.r.Run(ctx, cmd, stdin)
}

func (e executor) Upload(ctx context.Context, path string, content []byte, mode os.FileMode) error {
	q := shell.Quote(path)
	res, err := e.r.Run(ctx, fmt.Sprintf("set -e; mkdir -p \"$(dirname %s)\"; cat > %s.tmp; chmod %o %s.tmp; mv %s.tmp %s", q, q, mode.Perm(), q, q, q), content)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("upload %s: exit %d: %s", path, res.ExitCode, res.Stderr)
	}
	return err
}

func (e executor) Read(ctx context.Context, path string) ([]byte, error) {
	res, err := e.r.Run(ctx, "[ -e "+shell.Quote(path)+" ] || exit 3; cat "+shell.Quote(path), nil)
	switch {
	case err != nil:
		return nil, err
	case res.ExitCode == 3:
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("read %s: exit %d: %s", path, res.ExitCode, res.Stderr)
	}
	return res.Stdout, nil
}

func (e executor) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, errors.New("apttest: a throwaway root dials nothing")
}
func (e executor) Note(string) error {
	return errors.New("apttest: a throwaway root has no tunnel to change anything through")
}
func (e executor) HostKey() string { return "SHA256:apttest" }
func (e executor) Close() error    { return nil }

// Serve serves the repositories under root (root/MINOR/...) inside the
// throwaway root's network namespace, at pkgs.k8s.io's paths, and returns
// the base URL (http://127.0.0.1:PORT) apt there reaches it at.
func (r *Root) Serve(root string) string {
	r.t.Helper()
	var ln net.Listener
	if err := netns.Do(r.NetnsPath(), func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	go aptrepo.Serve(ln, root)
	r.t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// Repos writes, under dir, one signed repository per minor of the
// Kubernetes packages of each version (their binaries from bins) and the
// packages they depend on, as the lab lays them out, with a new key. It
// returns the repositories' root (root/MINOR is one) and the key.
func Repos(t testing.TB, dir string, bins func(version string) aptrepo.Binaries, versions ...string) (string, *aptrepo.Key) {
	t.Helper()
	arch, err := aptrepo.Arch()
	if err != nil {
		toolstest.Missing(t, err.Error())
	}
	key, err := aptrepo.OpenKey(filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	byMinor := map[string][]string{}
	for _, v := range versions {
		specs, err := aptrepo.Specs(bins(v))
		if err != nil {
			t.Fatal(err)
		}
		m := aptrepo.Minor(v)
		for _, s := range append(specs, aptrepo.Dependencies(m)...) {
			deb, err := aptrepo.Build(filepath.Join(dir, "debs", v), arch, s)
			if err != nil {
				t.Fatal(err)
			}
			byMinor[m] = append(byMinor[m], deb)
		}
	}
	for m, debs := range byMinor {
		if err := aptrepo.Write(filepath.Join(dir, "repo", m), arch, m, debs, key); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "repo"), key
}
