package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// restartPods, run by sh and by bash (pipefail: pgrep finding nothing
// while the component restarts must not end the script) against a
// component a supervisor loop restarts (the kubelet's part), ends the
// running process, waits for the new one, and does not kill the shell
// that runs it, whose command line carries the pattern.
func TestRestartPodsScript(t *testing.T) {
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) { testRestartPodsScript(t, sh) })
	}
}

func testRestartPodsScript(t *testing.T, sh string) {
	dir := t.TempDir()
	name := "homelab-test-component-" + strconv.Itoa(os.Getpid())
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		toolstest.Missing(t, err.Error())
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pid")
	sup := exec.Command("sh", "-c", `while :; do "$1" 1000 & echo $! > "$2"; wait $!; done`, "sh", bin, pidFile)
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	// The supervisor and its component alone, by process group.
	t.Cleanup(func() { _ = syscall.Kill(-sup.Process.Pid, syscall.SIGKILL); _ = sup.Wait() })
	readPID := func() string {
		for range 100 {
			if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				return strings.TrimSpace(string(b))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("the component never started")
		return ""
	}
	first := readPID()
	os.Remove(pidFile)
	out, err := exec.Command(sh, "-c", restartPods([]string{name}).String()).CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	if second := readPID(); second == first {
		t.Errorf("the component still runs as %s", first)
	}
}

// regeneratePod's script, run by sh and bash with kubeadm and pgrep stood
// in for: the old process is read before kubeadm writes the manifest
// (none yet is no failure), and the script returns only once another
// process runs.
func TestRegeneratePodWaitsForTheNewProcess(t *testing.T) {
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) { testRegeneratePod(t, sh) })
	}
}

func testRegeneratePod(t *testing.T, sh string) {
	bin := t.TempDir()
	state := filepath.Join(bin, "restarted")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The kubelet restarts the pod a few polls after its manifest changed.
	write("kubeadm", `echo "$@" > `+bin+`/kubeadm.args; echo 0 > `+state+"\n")
	write("pgrep", `if [ -f `+state+` ]; then n=$(cat `+state+`); echo $((n+1)) > `+state+`; [ "$n" -ge 2 ] && { echo 200; exit 0; }; fi; echo 100`+"\n")
	cmd := exec.Command(sh, "-c", regeneratePod(nodefacts.KubeAPIServer, "/etc/kubernetes/kubeadm/init.yaml").String())
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if args, _ := os.ReadFile(filepath.Join(bin, "kubeadm.args")); !strings.Contains(string(args), "init phase control-plane apiserver --config /etc/kubernetes/kubeadm/init.yaml") {
		t.Errorf("kubeadm ran with %q", args)
	}
	if n, _ := os.ReadFile(state); strings.TrimSpace(string(n)) != "3" || time.Since(start) < 2*time.Second {
		t.Errorf("returned after polls %s, %s: want 3 polls, the new process running", n, time.Since(start))
	}
}

func TestRenewalScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, scripts.Render("pods/await-new", nil), "")
	scriptstest.Golden(t, restartPods([]string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler}), "")
	scriptstest.Golden(t, regeneratePod(nodefacts.KubeAPIServer, "/etc/kubernetes/kubeadm/init.yaml"), "")
	scriptstest.Golden(t, scripts.Render("pods/kill", podOf(nodefacts.Etcd)), "")
	scriptstest.Golden(t, renewKubeconfigs("/etc/kubernetes/kubeadm/init.yaml", []string{"admin.conf", "super-admin.conf"}), "")
	scriptstest.Golden(t, reviveRestart(), "")
}
