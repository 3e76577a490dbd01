package provider

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A detached run's output holds what kubeadm and apt print (join
// commands, tokens, certificate keys): it is readable by root only, while
// the command itself runs with the node's usual umask (a umask of 077
// leaking into apt or kubeadm would make the files they create unreadable
// to the services that need them). The start script runs here, in sh, as
// on a node.
func TestDetachedOutputIsPrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "runs", "kubeadm-init")
	script := detachedStart(d, "0123456789abcdef", "echo token abc.def; umask; touch "+shell.Quote(filepath.Join(filepath.Dir(d), "made")))
	if out, err := exec.Command("sh", "-c", "umask 022\n"+script.String()).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "started" {
		t.Fatalf("start: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(d, "rc")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{d, filepath.Join(d, "out")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others can read a run's output", p, fi.Mode().Perm())
		}
	}
	out, _ := os.ReadFile(filepath.Join(d, "out"))
	if !strings.Contains(string(out), "token abc.def") || !strings.Contains(string(out), "0022") {
		t.Errorf("the command's output (with its umask): %q", out)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(d), "made")); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o644 {
		t.Errorf("a file the command made is %v, want 0644 (the node's umask)", fi.Mode().Perm())
	}
}

// busyNode is a node whose detached run of name, left by an earlier up,
// still runs past the provider's bound (a slow image pull).
func busyNode(t *testing.T, lab *fakeLab, node, name string) *fakeNode {
	t.Helper()
	lab.config().detachedBound = 50 * time.Millisecond
	n := lab.node(node)
	n.onScriptWith("detached/pending", "'"+runsDir+"/"+name+"'", "pending\n", 0)
	n.onScript("detached/start", "running\n", 0)
	n.onScript("detached/poll", "running\n", 0)
	n.onScript("detached/process", "4242\nsh -c kubeadm join --config /etc/kubernetes/kubeadm/join.yaml\n", 0)
	// What a reset would run, should the step go on.
	n.onScript("kubeadm/reset", "", 0)
	n.onScript("kubeadm/reset-keep-cas", "", 0)
	return n
}

// A kubeadm run an earlier up left going past the bound makes the node
// busy: the step refuses, naming the node, the command and what to do,
// and never resets under it.
func TestNoResetUnderARunningKubeadm(t *testing.T) {
	for _, tc := range []struct {
		name, run, what string
		step            func(*fakeLab) error
	}{
		{"join", joinRun, "kubeadm join", func(lab *fakeLab) error {
			in := KubeadmJoinArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/join.yaml"}
			lab.node("gpu-1").onScript("nodefacts/state", nodefacts.StatePartial+"\n", 0)
			lab.node("cp-1").onScript("cluster/readyz", "", 1)
			return runJoin(lab.ctx(), in)
		}},
		{"init", initRun, "kubeadm init", func(lab *fakeLab) error {
			lab.node("gpu-1").onScript("nodefacts/state", nodefacts.StatePartial+"\n", 0)
			return bootstrap(lab.ctx(), KubeadmInitArgs{Connection: lab.conn("gpu-1"), ConfigPath: "/etc/kubernetes/kubeadm/init.yaml"}, &KubeadmInitState{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			n := busyNode(t, lab, "gpu-1", tc.run)
			err := tc.step(lab)
			var busy *busyError
			if !errors.As(err, &busy) {
				t.Fatalf("a node running %s: %v", tc.what, err)
			}
			for _, want := range []string{"gpu-1", tc.what, "pid 4242: sh -c kubeadm join --config", "kill -- -4242", runsDir + "/" + tc.run, "up again"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			if n.asked("kubeadm reset") || n.asked("rm -rf") || n.ran("detached/remove") > 0 {
				t.Errorf("reset or removed under a running kubeadm: %v", n.mutations())
			}
		})
	}
}

// A run of a rendered script is named by its script: ps shows the whole
// script on its command line, header and comments included.
func TestBusyNamesTheScriptRunning(t *testing.T) {
	lab := newFakeLab(t)
	n := busyNode(t, lab, "gpu-1", joinRun)
	n.onScript("detached/process", "4242\nsh -c # homelab: kubeadm/join set -eu # shellcheck disable=SC3040 (set -o pipefail) 2>/dev/null && set -o pipefail kubeadm join --config /etc/kubernetes/kubeadm/join.yaml\n", 0)
	c, err := lab.dial(lab.ctx(), lab.conn("gpu-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = runningNow(lab.ctx(), c, "gpu-1", "kubeadm join", runsDir+"/"+joinRun)
	if want := "(pid 4242: sh -c # homelab: kubeadm/join)"; !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal does not say %q: %v", want, err)
	}
}
