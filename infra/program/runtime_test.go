package program

import (
	"slices"
	"strings"
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
	for _, n := range []string{"cp-1", "gpu-1"} {
		if !slices.Contains(requires(m, t, n), "containerd") {
			t.Errorf("%s's Host does not require the containerd up configures but does not install: %v", n, requires(m, t, n))
		}
	}
	m = runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.ContainerRuntime.Manage = false })
	if _, ok := m.all[serviceToken+"/cp-1:"+containerd.Unit]; ok {
		t.Error("an unmanaged runtime gets a containerd Service")
	}
	if slices.Contains(requires(m, t, "gpu-1"), "containerd") {
		t.Error("an unmanaged runtime's Host requires containerd in PATH: its own check asks the socket")
	}
}

// Pinned runtime packages: every node installs runc, then containerd, at
// the pins and held, one node after another, before containerd's
// config.toml is written over the package's; the Host no longer judges
// the containerd the node had before.
func TestRuntimePackagesNodeByNode(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.ContainerRuntime.Manage = true
		inv.Cluster.ContainerRuntime.Packages = &inventory.RuntimePackages{Containerd: "1.7.28", Runc: "1.1.12-1"}
	})
	var prev string
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		runc, ctrd := m.get(t, pkgToken, n+":runc"), m.get(t, pkgToken, n+":"+containerd.Unit)
		if in := ctrd.inputs; in["pinnedVersion"].StringValue() != "1.7.28" || !in["anyRevision"].BoolValue() || in["names"].ArrayValue()[0].StringValue() != "containerd" {
			t.Errorf("%s's containerd package: %v", n, in)
		}
		if in := runc.inputs; in["pinnedVersion"].StringValue() != "1.1.12-1" || in["anyRevision"].BoolValue() {
			t.Errorf("%s's runc package: %v", n, in)
		}
		if !dependsOn(runc, "homelab:index:Host", n) || !dependsOn(ctrd, pkgToken, n+":runc") {
			t.Errorf("%s: runc after the Host %v, containerd after runc %v", n, runc.deps, ctrd.deps)
		}
		// After the previous node's containerd restarted (and its
		// control plane came back): a swap restarts its pods.
		if prev != "" && !dependsOn(runc, serviceToken, prev+":"+containerd.Unit) {
			t.Errorf("%s installs before %s's containerd restarted: %v", n, prev, runc.deps)
		}
		if f := m.get(t, "homelab:index:File", n+":"+containerd.ConfigPath); !dependsOn(f, pkgToken, n+":"+containerd.Unit) {
			t.Errorf("%s's config.toml is written before its containerd package: %v", n, f.deps)
		}
		if in := m.get(t, "homelab:index:Host", n).inputs; in.HasValue("runtime") || slices.Contains(requires(m, t, n), "containerd") {
			t.Errorf("%s's Host judges the containerd it had, or requires one: %v, %v", n, in["runtime"], requires(m, t, n))
		}
		prev = n
	}
	m = runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.ContainerRuntime.Manage = true })
	if _, ok := m.all[pkgToken+"/cp-1:runc"]; ok {
		t.Error("a runtime without pins gets a runc Package")
	}
	if rt := m.get(t, "homelab:index:Host", "cp-1").inputs["runtime"].ObjectValue(); rt["kubernetesVersion"].StringValue() != "v1.34.4" {
		t.Errorf("the Host does not judge the node's own containerd: %v", rt)
	}
}

// Docker's repository: each node installs containerd.io (runc inside) at
// the pin from that repository, under the name the distribution's
// containerd had, one node after another; no runc Package.
func TestRuntimePackagesFromDockersRepository(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.ContainerRuntime.Manage = true
		inv.Cluster.ContainerRuntime.Packages = &inventory.RuntimePackages{Containerd: "2.2.1-1",
			Repository: &inventory.RuntimeRepository{URL: "https://download.docker.com/linux/debian", Suite: "bookworm", Component: "stable"}}
	})
	var prev string
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		if _, ok := m.all[pkgToken+"/"+n+":runc"]; ok {
			t.Errorf("%s gets the distribution's runc beside containerd.io", n)
		}
		pkg := m.get(t, pkgToken, n+":"+containerd.Unit)
		in := pkg.inputs
		if in["names"].ArrayValue()[0].StringValue() != "containerd.io" || in["pinnedVersion"].StringValue() != "2.2.1-1" || len(in["replaces"].ArrayValue()) != 2 {
			t.Errorf("%s's containerd package: %v", n, in)
		}
		repo := in["repository"].ObjectValue()
		if !strings.Contains(repo["sources"].StringValue(), "https://download.docker.com/linux/debian bookworm stable") ||
			repo["keyURL"].StringValue() != "https://download.docker.com/linux/debian/gpg" {
			t.Errorf("%s's repository: %v", n, repo)
		}
		if f := m.get(t, "homelab:index:File", n+":"+containerd.ConfigPath); !dependsOn(f, pkgToken, n+":"+containerd.Unit) {
			t.Errorf("%s's config.toml is written before containerd.io: %v", n, f.deps)
		}
		// containerd 2: config version 3.
		if f := m.get(t, "homelab:index:File", n+":"+containerd.ConfigPath); !strings.Contains(f.inputs["content"].StringValue(), "version = 3") {
			t.Errorf("%s's config.toml is not containerd 2's:\n%s", n, f.inputs["content"].StringValue())
		}
		if prev != "" && !dependsOn(pkg, serviceToken, prev+":"+containerd.Unit) {
			t.Errorf("%s installs before %s's containerd restarted: %v", n, prev, pkg.deps)
		}
		svc := m.get(t, serviceToken, n+":"+containerd.Unit)
		if cp := svc.inputs["controlPlane"]; strings.HasPrefix(n, "cp-") != cp.IsObject() {
			t.Errorf("%s's containerd Service waits for a control plane: %v", n, cp)
		}
		prev = n
	}
}
