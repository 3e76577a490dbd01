package systemctl

import (
	"bytes"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// node is init running as PID 1 of a fresh PID and mount namespace, with a
// private /run, its unit files under root.
type node struct {
	t       *testing.T
	bin     string
	root    string
	unshare *exec.Cmd
	exited  chan struct{} // closed once unshare has been waited for
	initLog *bytes.Buffer
}

func buildNodeBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "homelab-node")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/nodebin").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startNode(t *testing.T, bin, root string) *node {
	t.Helper()
	n := &node{t: t, bin: bin, root: root, initLog: &bytes.Buffer{}, exited: make(chan struct{})}
	n.unshare = exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount",
		"sh", "-c", `mount -t tmpfs tmpfs /run && exec "$0" init --root "$1" --stop-timeout 2s`, bin, root)
	n.unshare.Stdout, n.unshare.Stderr = n.initLog, n.initLog
	if err := n.unshare.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = n.unshare.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = n.unshare.Process.Kill() // --kill-child takes the namespace down
		<-n.exited
		if t.Failed() {
			t.Logf("init's log:\n%s", n.initLog)
		}
	})
	n.eventually("init answers", 5*time.Second, func() bool {
		_, _, code := n.systemctl("is-system-running")
		return code == 0
	})
	return n
}

func (n *node) systemctl(args ...string) (string, string, int) {
	cmd := exec.Command(n.bin, append([]string{"systemctl"}, args...)...)
	cmd.Env = append(os.Environ(), "HOMELAB_INIT_ROOT="+n.root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// must runs systemctl and checks its exit code.
func (n *node) must(code int, args ...string) string {
	n.t.Helper()
	out, errs, got := n.systemctl(args...)
	if got != code {
		n.t.Fatalf("systemctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errs)
	}
	return out
}

func (n *node) eventually(what string, timeout time.Duration, ok func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) mainPID(unit string) int {
	n.t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(n.must(0, "show", "-p", "MainPID", "--value", unit)))
	if err != nil {
		n.t.Fatal(err)
	}
	return pid
}

// initPID is init's PID as seen from the test (the unshare child).
func (n *node) initPID() int {
	pid := n.unshare.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		n.t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		n.t.Fatalf("unshare has children %q", f)
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// procs finds the node's processes (host PIDs) whose command line matches,
// with their state and parent. Other namespaces on the machine (a running
// lab, say) are left out.
func (n *node) procs(match func(cmdline string) bool) map[int][2]string {
	out := map[int][2]string{}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", n.initPID()))
	if err != nil {
		n.t.Fatal(err)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l != ns {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || !match(strings.ReplaceAll(string(cmd), "\x00", " ")) {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		out[pid] = [2]string{f[0], f[1]} // state, ppid
	}
	return out
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInitInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "needs root: runs init in new PID and mount namespaces")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		toolstest.Missing(t, "needs util-linux unshare")
	}
	bin := buildNodeBin(t)
	root := t.TempDir()
	times := filepath.Join(root, "crash.times")
	writeFiles(t, root, map[string]string{
		"/etc/systemd/system/sleeper.service": "[Unit]\nDescription=Sleeps\n[Service]\nExecStart=/bin/sleep 1000\n[Install]\nWantedBy=multi-user.target\n",
		"/usr/lib/systemd/system/crasher.service": fmt.Sprintf(
			"[Service]\nExecStart=/bin/sh -c 'date +%%%%s.%%%%N >> %s; echo dying; exit 3'\nRestart=always\nRestartSec=200ms\n", times),
		"/usr/lib/systemd/system/forker.service": "[Service]\n" +
			"ExecStart=/bin/sh -c 'setsid sleep 987654 & (sleep 0.2 &); exec sleep 1001'\n",
		"/usr/lib/systemd/system/pre.service": "[Service]\nExecStartPre=-/bin/false\nExecStartPre=/bin/false\nExecStart=/bin/sleep 1003\n",
		"/usr/lib/systemd/system/env.service": "[Service]\nEnvironment=B=braced\nEnvironmentFile=/etc/default/env\n" +
			"ExecStart=/bin/sh -c \"echo A=$A B=${B}; exec sleep 1002\"\n",
		"/etc/default/env": "A=\"from file\"\n",
	})
	if err := os.MkdirAll(filepath.Join(root, "/etc/systemd/system/multi-user.target.wants"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/systemd/system/sleeper.service", filepath.Join(root, "/etc/systemd/system/multi-user.target.wants/sleeper.service")); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, bin, root)
	t.Run("boot starts enabled units", func(t *testing.T) {
		n.t = t
		n.eventually("sleeper active", 3*time.Second, func() bool {
			out, _, code := n.systemctl("is-active", "sleeper")
			return code == 0 && out == "active\n"
		})
		out := n.must(0, "status", "sleeper", "--no-pager")
		for _, want := range []string{
			"● sleeper.service - Sleeps\n",
			"Loaded: loaded (/etc/systemd/system/sleeper.service; enabled; preset: enabled)",
			"Active: active (running) since ",
			"Main PID: ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
		n.must(0, "is-enabled", "sleeper")
	})

	t.Run("what kubeadm asks", func(t *testing.T) {
		n.t = t
		_, errs, _ := n.systemctl("status", "firewalld")
		if !strings.Contains(errs, "Unit firewalld.service could not be found.") {
			t.Errorf("stderr %q", errs)
		}
		n.must(4, "status", "firewalld")
		if out := n.must(3, "is-active", "systemd-resolved"); out != "inactive\n" {
			t.Errorf("is-active systemd-resolved printed %q", out)
		}
		n.must(0, "daemon-reload")
		n.must(5, "start", "nonexistent")
	})

	t.Run("restart changes the PID, stop deactivates", func(t *testing.T) {
		n.t = t
		before := n.mainPID("sleeper")
		n.must(0, "restart", "sleeper")
		after := n.mainPID("sleeper")
		if before == 0 || after == 0 || before == after {
			t.Fatalf("MainPID %d before restart, %d after", before, after)
		}
		n.must(0, "stop", "sleeper")
		if out := n.must(3, "is-active", "sleeper"); out != "inactive\n" {
			t.Errorf("after stop: %q", out)
		}
		if out := n.must(3, "status", "sleeper"); !strings.Contains(out, "Active: inactive (dead)") {
			t.Errorf("status after stop:\n%s", out)
		}
		if p := n.procs(func(c string) bool { return c == "/bin/sleep 1000 " }); len(p) > 0 {
			t.Errorf("sleeper's process survived stop: %v", p)
		}
	})

	t.Run("failing ExecStartPre fails the start", func(t *testing.T) {
		n.t = t
		_, errs, code := n.systemctl("start", "pre")
		if code != 1 || !strings.Contains(errs, "Job for pre.service failed") {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		if out := n.must(3, "is-active", "pre"); out != "failed\n" {
			t.Errorf("is-active pre: %q", out)
		}
	})

	t.Run("environment", func(t *testing.T) {
		n.t = t
		n.must(0, "start", "env")
		log := filepath.Join(root, "var/log/homelab/env.log")
		n.eventually("env.log written", 3*time.Second, func() bool {
			b, _ := os.ReadFile(log)
			return strings.Contains(string(b), "A=from file B=braced\n")
		})
		n.must(0, "stop", "env")
	})

	t.Run("crashing unit restarts with back-off", func(t *testing.T) {
		n.t = t
		n.must(0, "start", "crasher")
		var stamps []float64
		n.eventually("five starts", 6*time.Second, func() bool {
			b, _ := os.ReadFile(times)
			stamps = stamps[:0]
			for _, f := range strings.Fields(string(b)) {
				v, _ := strconv.ParseFloat(f, 64)
				stamps = append(stamps, v)
			}
			return len(stamps) >= 5
		})
		n.must(0, "stop", "crasher")
		first, last := stamps[1]-stamps[0], stamps[4]-stamps[3]
		if first < 0.15 || last < 4*first*0.8 {
			t.Errorf("restart gaps %.2fs then %.2fs: no back-off (%v)", first, last, stamps)
		}
		if v, _ := strconv.Atoi(strings.TrimSpace(n.must(0, "show", "-p", "NRestarts", "--value", "crasher"))); v < 4 {
			t.Errorf("NRestarts=%d", v)
		}
		if out := n.must(3, "is-active", "crasher"); out != "inactive\n" {
			t.Errorf("after stop: %q", out)
		}
	})

	t.Run("setsid children survive stop; orphans are reaped", func(t *testing.T) {
		n.t = t
		n.must(0, "start", "forker")
		survivor := func() map[int][2]string {
			return n.procs(func(c string) bool { return c == "sleep 987654 " })
		}
		n.eventually("setsid child running", 3*time.Second, func() bool { return len(survivor()) == 1 })
		n.must(0, "stop", "forker")
		if len(survivor()) != 1 {
			t.Fatal("the setsid child died with its unit")
		}
		if p := n.procs(func(c string) bool { return c == "sleep 1001 " }); len(p) > 0 {
			t.Errorf("forker's main process survived stop: %v", p)
		}
		init := strconv.Itoa(n.initPID())
		for pid, st := range survivor() {
			if st[1] != init {
				t.Errorf("survivor %d has parent %s, want init %s", pid, st[1], init)
			}
		}
		time.Sleep(400 * time.Millisecond) // the (sleep 0.2 &) orphan ends
		zombies := n.procs(func(string) bool { return true })
		for pid, st := range zombies {
			if st[0] == "Z" && st[1] == init {
				t.Errorf("init left zombie %d", pid)
			}
		}
	})

	t.Run("disable works on files", func(t *testing.T) {
		n.t = t
		n.must(0, "disable", "sleeper")
		if out := n.must(1, "is-enabled", "sleeper"); out != "disabled\n" {
			t.Errorf("is-enabled after disable: %q", out)
		}
		n.must(0, "enable", "--now", "sleeper")
		n.must(0, "is-active", "sleeper")
	})

	t.Run("SIGTERM stops units and exits", func(t *testing.T) {
		n.t = t
		if err := syscall.Kill(n.initPID(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("init did not exit on SIGTERM")
		}
		if log := n.initLog.String(); !strings.Contains(log, "stopping all units") || !strings.HasSuffix(log, "stopped\n") {
			t.Errorf("init log does not show an orderly stop:\n%s", log)
		}
	})
}
