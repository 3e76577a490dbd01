package program

import (
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

// The dataplane follows init (restoring kube-proxy needs its config on the
// bootstrap node, through which it goes), gives Cilium the endpoint, never
// one node's address in the vip layout, and reaches every node to clean
// kube-proxy's rules.
func TestDataplaneDeclared(t *testing.T) {
	m := runMocked(t, inventory.LayoutVIP)
	d := m.get(t, "homelab:index:Dataplane", "dataplane")
	if !dependsOn(d, "homelab:index:KubeadmInit", "homelab") {
		t.Errorf("Dataplane does not follow init: %v", d.deps)
	}
	if got := d.inputs["via"].ObjectValue()["node"].StringValue(); got != "cp-1" {
		t.Errorf("via %q, want the bootstrap node cp-1", got)
	}
	// It waits for every node Ready: every node must have joined first,
	// the bootstrap node's membership included.
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-4"} {
		if !dependsOn(d, "homelab:index:KubeadmJoin", n) {
			t.Errorf("Dataplane does not follow %s's join: %v", n, d.deps)
		}
	}
	if got := d.inputs["cni"].StringValue(); got != "cilium" {
		t.Errorf("cni %q", got)
	}
	if got := d.inputs["replacement"].StringValue(); got != "cilium" {
		t.Errorf("replacement %q", got)
	}
	values := d.inputs["values"].StringValue()
	if !strings.Contains(values, "k8sServiceHost: 10.0.0.100") || !strings.Contains(values, "kubeProxyReplacement: true") {
		t.Errorf("values:\n%s", values)
	}
	if n := len(d.inputs["nodes"].ArrayValue()); n != 7 {
		t.Errorf("%d nodes to clean", n)
	}
	if d.inputs["chart"].StringValue() != "" || d.inputs["chartVersion"].StringValue() == "" {
		t.Errorf("default chart source: %q %q", d.inputs["chart"].StringValue(), d.inputs["chartVersion"].StringValue())
	}
}
