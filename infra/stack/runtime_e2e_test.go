package stack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/doctor"
)

// runtimeRow is doctor's runtime row for node.
func runtimeRow(rep *doctor.Report, node string) (doctor.Finding, bool) {
	for _, f := range rep.Findings {
		if f.Check == "runtime" && f.Where == node {
			return f, true
		}
	}
	return doctor.Finding{}, false
}

// TestRuntimeCgroupDriverInTheLab is the mismatch that breaks most
// hand-built kubeadm nodes, on real nodes: the worker's containerd is put
// back to its package's runc default (cgroupfs) while kubeadm gave the
// kubelet systemd. doctor fails naming both drivers and the fix, and a
// pod's container lands outside the kubelet's cgroups; with
// SystemdCgroup restored doctor passes again and a pod runs inside them.
func TestRuntimeCgroupDriverInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, soloRealInventory, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := e.open(ctx, e.invPath)
	e.up(ctx, s)
	e.verify(ctx, s)
	if f, ok := runtimeRow(e.doctor(ctx, s.Inv, s.Bundle), "w1"); !ok || f.Status != doctor.OK || !strings.Contains(f.Detail, "systemd") {
		t.Fatalf("doctor's runtime row for w1 on a working node: %+v (found %v)", f, ok)
	}

	const config = "/etc/containerd/config.toml"
	e.node(ctx, "w1", "sed -i 's/SystemdCgroup = true/SystemdCgroup = false/' "+config+" && systemctl restart containerd")
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	f, ok := runtimeRow(rep, "w1")
	if !ok || f.Status != doctor.Fail || !strings.Contains(f.Detail, "cgroupfs") {
		t.Errorf("doctor's runtime row for w1 on cgroupfs: %+v (found %v)", f, ok)
	}
	if !causesMention(rep, "w1", "SystemdCgroup = true", "restart containerd") {
		t.Errorf("doctor does not name w1's mismatch and its fix: %v", rep.Causes)
	}
	// The real containerd 1.6 still starts the pod (measured: it turns
	// Ready), but runc puts its container in a cgroup of its own making,
	// outside the kubelet's kubepods.slice: the kubelet's QoS limits and
	// evictions no longer hold it.
	const pod = labKubectl + "run cgroup-probe --image=registry.k8s.io/pause:3.10.1 --restart=Never --overrides='{\"spec\":{\"nodeName\":\"w1\"}}'"
	e.node(ctx, "solo", pod)
	out, err := e.lab.Run(ctx, "solo", labKubectl+"wait --for=condition=Ready pod/cgroup-probe --timeout=60s")
	t.Logf("figures: a pod on w1 with containerd on cgroupfs: ready=%v %s", err == nil, strings.TrimSpace(out))
	if cg := e.probeCgroup(ctx); err == nil && strings.HasPrefix(cg, "/kubepods.slice/") {
		t.Errorf("the pod's container is in the kubelet's cgroup %s with containerd on cgroupfs", cg)
	}
	e.node(ctx, "solo", labKubectl+"delete pod cgroup-probe --wait=true")

	e.node(ctx, "w1", "sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' "+config+" && systemctl restart containerd")
	if f, ok := runtimeRow(e.doctor(ctx, s.Inv, s.Bundle), "w1"); !ok || f.Status != doctor.OK {
		t.Errorf("doctor's runtime row for w1 restored: %+v (found %v)", f, ok)
	}
	e.node(ctx, "solo", pod)
	if out, err := e.lab.Run(ctx, "solo", labKubectl+"wait --for=condition=Ready pod/cgroup-probe --timeout=120s"); err != nil {
		t.Errorf("a pod on w1 with containerd on systemd cgroups: %v %s\n%s", err, out, e.node(ctx, "solo", labKubectl+"describe pod cgroup-probe | tail -n 8"))
	}
	if cg := e.probeCgroup(ctx); !strings.HasPrefix(cg, "/kubepods.slice/") {
		t.Errorf("the pod's container is in %q with containerd on systemd cgroups, want the kubelet's kubepods.slice", cg)
	}
}

// probeCgroup is the memory cgroup of the cgroup-probe pod's container on
// w1, as its process sees it.
func (e *e2e) probeCgroup(ctx context.Context) string {
	id := strings.TrimSpace(e.node(ctx, "w1", `ctr --namespace k8s.io containers ls --quiet 'labels."io.kubernetes.container.name"==cgroup-probe'`))
	pid := strings.TrimSpace(e.node(ctx, "w1", "ctr --namespace k8s.io task ls | awk -v id="+id+" '$1 == id { print $2 }'"))
	cg := strings.TrimSpace(e.node(ctx, "w1", "awk -F: '$2 == \"memory\" { print $3 }' /proc/"+pid+"/cgroup"))
	e.t.Logf("figures: the pod's container %.12s, pid %s, memory cgroup %s", id, pid, cg)
	return cg
}
