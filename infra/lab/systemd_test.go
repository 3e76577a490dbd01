package lab

import (
	"bytes"
	"context"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealNodeInTheLab is issue 30's first stage: one node of the default
// lab boots Debian 12 for real beside the stand-in nodes. systemd is its
// PID 1 and reaches `running` with no failed unit; containerd and runc
// run a real container for the real kubelet (a static pod, standalone),
// in a systemd scope, as the systemd cgroup driver puts it; power-off
// leaves no cgroup of the node behind and power-on boots it again from its
// disk.
func TestRealNodeInTheLab(t *testing.T) {
	needLab(t)
	l := newTestLab(t)
	l.Systemd = []string{"gpu-4"}
	s := up(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := s.Node("gpu-4")
	if err != nil {
		t.Fatal(err)
	}
	if n.System != SystemSystemd {
		t.Fatalf("gpu-4 boots %q", n.System)
	}
	if other, _ := s.Node("gpu-3"); other.System != SystemStandIn {
		t.Fatalf("gpu-3 boots %q, not the stand-ins", other.System)
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := l.Run(ctx, "gpu-4", cmd)
		if err != nil {
			t.Fatalf("gpu-4: %v", err)
		}
		return strings.TrimSpace(out)
	}

	// systemd reaches running: every unit started, none failed.
	booted := time.Now()
	if out, err := l.Run(ctx, "gpu-4", "systemctl is-system-running --wait"); strings.TrimSpace(out) != "running" {
		failed, _ := l.Run(ctx, "gpu-4", "systemctl --failed --no-legend; journalctl -b --no-pager -p warning | tail -n 40")
		t.Fatalf("systemctl is-system-running: %q (%v)\n%s", out, err, failed)
	}
	t.Logf("gpu-4: systemd running %s after sshd answered", time.Since(booted).Round(10*time.Millisecond))
	if got := run("cat /proc/1/comm"); got != "systemd" {
		t.Errorf("gpu-4's PID 1 is %q", got)
	}
	if got := run("systemctl is-active ssh containerd"); got != "active\nactive" {
		t.Errorf("units: %q", got)
	}
	// The node is air-gapped: its mirror, the lab's registry, answers for
	// registry.k8s.io, and an image the registry lacks is not found there
	// rather than looked for on the Internet.
	if out, err := l.Run(ctx, "gpu-4", "ctr --namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d registry.k8s.io/no-such-image:v0 2>&1"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("pulling an image the lab's registry lacks: %v: %s", err, out)
	}

	// kube-proxy's image runs as the DaemonSet runs it: its binary, and
	// the iptables it programs the node with, on the node's network.
	for _, c := range []string{
		"ctr --namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d registry.k8s.io/kube-proxy:" + tools.KubernetesVersion + " >/dev/null",
		"ctr --namespace k8s.io run --rm --net-host --privileged registry.k8s.io/kube-proxy:" + tools.KubernetesVersion + " kp-version /usr/local/bin/kube-proxy --version",
		"ctr --namespace k8s.io run --rm --net-host --privileged registry.k8s.io/kube-proxy:" + tools.KubernetesVersion + " kp-iptables iptables -t nat -L -n",
	} {
		if out, err := l.Run(ctx, "gpu-4", c+" 2>&1"); err != nil {
			t.Errorf("%s: %v: %s", c, err, out)
		}
	}

	// The real kubelet, standalone, runs a static pod as a real container.
	put := func(path string, data []byte) {
		t.Helper()
		c, err := l.SSH(ctx, "gpu-4")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		sess.Stdin = bytes.NewReader(data)
		if out, err := sess.CombinedOutput("mkdir -p " + filepath.Dir(path) + " && cat > " + path); err != nil {
			t.Fatalf("writing %s: %v: %s", path, err, out)
		}
	}
	// containerd as homelab up configures it (the node boots with
	// Debian's packaged file, on which the sandbox's pull would look for
	// registry.k8s.io, and runc would run on cgroupfs).
	conf, err := containerd.Render(containerd.Config{Major: 1, SandboxImage: kubeadm.PauseImage(tools.KubernetesVersion),
		SystemdCgroup: kubeadm.CgroupDriver == "systemd", RestrictOOMScoreAdj: true})
	if err != nil {
		t.Fatal(err)
	}
	put(containerd.ConfigPath, conf)
	run("systemctl restart containerd")
	for src, dst := range map[string]string{
		"kubelet-config.yaml": "/var/lib/kubelet/config.yaml",
		"probe.yaml":          "/etc/kubernetes/manifests/probe.yaml",
		"20-standalone.conf":  "/etc/systemd/system/kubelet.service.d/20-standalone.conf",
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "realnode", src))
		if err != nil {
			t.Fatal(err)
		}
		put(dst, data)
	}
	run("systemctl daemon-reload && systemctl restart kubelet")
	deadline := time.Now().Add(3 * time.Minute)
	var scope string
	for {
		// The container's task, and the scope the systemd cgroup driver
		// made for it under the kubelet's kubepods slice.
		scope, _ = l.Run(ctx, "gpu-4", `id=$(ctr --namespace k8s.io containers ls --quiet 'labels."io.kubernetes.container.name"==probe' | head -n 1)
[ -n "$id" ] && ctr --namespace k8s.io tasks ls | awk -v id="$id" '$1 == id && $3 == "RUNNING"' | grep -q . && systemctl list-units --no-legend --plain "cri-containerd-$id.scope" | awk '{ print $1 }'`)
		scope = strings.TrimSpace(scope)
		if scope != "" {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := l.Run(ctx, "gpu-4", "systemctl status kubelet --no-pager | head -n 5; journalctl -u kubelet --no-pager | tail -n 40")
			t.Fatalf("the probe's container is not running in a systemd scope after 3 minutes:\n%s", logs)
		}
		time.Sleep(time.Second)
	}
	// The sandbox's pause came through the mirror (the CRI's pull, as the
	// kubelet asks for it).
	if got := run("ctr --namespace k8s.io images ls --quiet"); !strings.Contains(got, "registry.k8s.io/pause:") {
		t.Errorf("containerd has no pause image: %q", got)
	}
	if cg := run("systemctl show --property ControlGroup --value " + scope); !strings.Contains(cg, "kubepods") {
		t.Errorf("the probe's scope %s lies in %q, not under the kubelet's kubepods slice", scope, cg)
	}
	if got := run("curl -sS http://127.0.0.1:10248/healthz"); got != "ok" {
		t.Errorf("kubelet healthz: %q", got)
	}
	var pss uint64
	for _, pid := range pidsInNS(n.PIDNS) {
		pss += pssKiB(pid)
	}
	t.Logf("gpu-4 (systemd, journald, logind, dbus, sshd, containerd, a shim, the kubelet, one pod): %d processes, %d MiB PSS", len(pidsInNS(n.PIDNS)), pss>>10)

	// Power: every cgroup of the node goes with it; it boots again.
	if err := l.PowerOff("gpu-4"); err != nil {
		t.Fatal(err)
	}
	for _, d := range n.Cgroups {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("after power-off the node's cgroup %s remains (%v)", d, err)
		}
	}
	if err := l.PowerOn(ctx, "gpu-4"); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Run(ctx, "gpu-4", "systemctl is-system-running --wait"); strings.TrimSpace(got) != "running" {
		t.Errorf("after power-on: %q", got)
	}
	downLeavesNothing(t, l)
}

// Each hierarchy of this machine, as a real node mounts it: under the
// calling process's own cgroup (never a hierarchy's root), with the
// options that name its controllers and none of its flags.
func TestHostHierarchies(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/systemd"); err != nil {
		toolstest.Missing(t, "not a cgroup v1 (hybrid) machine: real nodes need one")
	}
	hs, err := hostHierarchies(NamesFor("/srv/x").Node("x"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range hs {
		seen[h.Dir] = true
		if !strings.HasPrefix(h.Host, "/sys/fs/cgroup/"+h.Dir+"/") || filepath.Base(h.Host) != NamesFor("/srv/x").Node("x") {
			t.Errorf("%s: node cgroup %s", h.Dir, h.Host)
		}
		for _, flag := range []string{"rw", "ro", "clone_children", "xattr"} {
			if strings.Contains(","+h.Options+",", ","+flag+",") {
				t.Errorf("%s: options %q keep the flag %s", h.Dir, h.Options, flag)
			}
		}
		switch h.Dir {
		case "systemd":
			if h.Type != "cgroup" || h.Options != "none,name=systemd" {
				t.Errorf("systemd hierarchy: %+v", h)
			}
		case "unified":
			if h.Type != "cgroup2" || h.Options != "" {
				t.Errorf("unified hierarchy: %+v", h)
			}
		}
	}
	for _, want := range []string{"systemd", "memory", "pids", "cpuset"} {
		if !seen[want] {
			t.Errorf("no %s hierarchy among %v", want, seen)
		}
	}
}
