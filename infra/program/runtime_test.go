package program

import (
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
)

const serviceToken = "homelab:index:Service"

// A managed runtime: every node's containerd restarts on its config.toml
// before its kubeadm steps, one node after another, and is left running
// should the inventory hand the runtime back. Unmanaged: no Service.
func TestManagedRuntimeRestartsNodeByNode(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.ContainerRuntime.Manage = true })
	var prev string
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		r := m.get(t, serviceToken, n+":"+containerd.Unit)
		if !dependsOn(r, "homelab:index:File", n+":"+containerd.ConfigPath) {
			t.Errorf("%s's containerd does not wait for its config.toml: %v", n, r.deps)
		}
		if prev != "" && !dependsOn(r, serviceToken, prev+":"+containerd.Unit) {
			t.Errorf("%s's containerd restarts beside %s's: %v", n, prev, r.deps)
		}
		if in := r.inputs; !in["keepRunning"].BoolValue() || in["trigger"].StringValue() == "" {
			t.Errorf("%s: %v", n, in)
		}
		join := m.get(t, "homelab:index:KubeadmJoin", n)
		if !dependsOn(join, serviceToken, n+":"+containerd.Unit) {
			t.Errorf("%s joins before its containerd restarted: %v", n, join.deps)
		}
		prev = n
	}
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if r := m.get(t, "homelab:index:KubeadmImages", n); !dependsOn(r, serviceToken, n+":"+containerd.Unit) {
			t.Errorf("%s pulls images before its containerd restarted: %v", n, r.deps)
		}
	}
	m = runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.ContainerRuntime.Manage = false })
	if _, ok := m.all[serviceToken+"/cp-1:"+containerd.Unit]; ok {
		t.Error("an unmanaged runtime gets a containerd Service")
	}
}
