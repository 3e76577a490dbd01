package stack

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRealWorkerInTheLab is issue 30's second stage: gpu-4 is a real node
// (Debian 12, systemd, containerd, runc, the real kubelet; docs/lab.md,
// "Real nodes") and the rest run the stand-ins. homelab up's program
// builds the cluster with Cilium's kube-proxy replacement (kube-proxy's
// image is not built for real nodes yet): kubeadm joins gpu-4, its real
// kubelet bootstraps its certificate and registers its Node, the lab's
// Cilium agent runs on it as a real container and writes the CNI
// configuration, the Node turns Ready, verify passes and the next up
// changes nothing.
func TestRealWorkerInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, withDataplane("cilium"), "gpu-4")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := e.open(ctx, e.inventory("real", nil))
	e.up(ctx, s)
	e.verify(ctx, s)

	if got := strings.TrimSpace(e.node(ctx, "gpu-4", "cat /proc/1/comm")); got != "systemd" {
		t.Fatalf("gpu-4's PID 1 is %q: not a real node", got)
	}
	// The real kubelet, its client certificate from the TLS bootstrap.
	if got := e.node(ctx, "gpu-4", "systemctl is-active kubelet; readlink /var/lib/kubelet/pki/kubelet-client-current.pem"); !strings.Contains(got, "active\n/var/lib/kubelet/pki/kubelet-client-") {
		t.Errorf("gpu-4's kubelet: %q", got)
	}
	// The agent is a real container, the CNI configuration its work.
	agent := e.node(ctx, "gpu-4", `ctr --namespace k8s.io containers ls --quiet 'labels."io.kubernetes.container.name"==cilium-agent'`)
	if strings.TrimSpace(agent) == "" {
		t.Errorf("no cilium-agent container in gpu-4's containerd")
	}
	if got := e.node(ctx, "gpu-4", "ls /etc/cni/net.d"); !strings.Contains(got, "05-cilium.conflist") {
		t.Errorf("gpu-4's /etc/cni/net.d: %q", got)
	}
	if changes := e.up(ctx, s); changes["same"] == 0 || len(changes) != 1 {
		t.Errorf("the second up changed something: %v", changes)
	}
}
