package program

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
)

const (
	pkgToken      = "homelab:index:Package"
	manifestToken = "homelab:index:Manifest"
)

func TestGPUWorkersGetTheToolkit(t *testing.T) {
	for _, manage := range []bool{false, true} {
		m := runMockedWith(t, func(inv *inventory.Inventory) {
			inv.Cluster.ContainerRuntime.Manage = manage
			for i := range inv.Nodes {
				if inv.Nodes[i].Name == "gpu-4" {
					inv.Nodes[i].GPUs = nil // a plain worker
				}
			}
		})
		for _, w := range []string{"gpu-1", "gpu-2", "gpu-3"} {
			r := m.get(t, pkgToken, w+":nvidia-container-toolkit")
			if !strings.HasSuffix(r.parent, "homelab:cluster:Worker::"+w) {
				t.Errorf("%s's toolkit is not a child of its Worker: %s", w, r.parent)
			}
			// Unmanaged, the NVIDIA runtime is a drop-in containerd reads
			// when it restarts; managed, it is in config.toml, whose
			// containerd Service restarts it.
			conf := gpu.ContainerdDropInPath
			if manage {
				conf = containerd.ConfigPath
			}
			if !dependsOn(r, "homelab:index:Host", w) || !dependsOn(r, "homelab:index:File", w+":"+conf) {
				t.Errorf("manage %v: %s's toolkit does not wait for its Host and %s: %v", manage, w, conf, r.deps)
			}
			in := r.inputs
			if in["pinnedVersion"].StringValue() != inventory.DefaultToolkitVersion || len(in["names"].ArrayValue()) != len(gpu.ToolkitPackages) {
				t.Errorf("%s: pinned %v %v", w, in["names"], in["pinnedVersion"])
			}
			if !in["requireNvidiaGPU"].BoolValue() || in["declaredGPUs"].NumberValue() != 1 {
				t.Errorf("%s: GPU requirement missing: %v", w, in)
			}
			restarts := in["restart"].IsString() && in["restart"].StringValue() == "containerd" && in["trigger"].IsString() && in["trigger"].StringValue() != ""
			if restarts == manage {
				t.Errorf("manage %v: %s's toolkit restarts containerd: %v", manage, w, restarts)
			}
			repo := in["repository"].ObjectValue()
			if repo["keyring"].StringValue() != gpu.ToolkitKeyring || !strings.Contains(repo["sources"].StringValue(), "signed-by="+gpu.ToolkitKeyring) {
				t.Errorf("%s: repository %v", w, repo)
			}
		}
		for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-4"} {
			if _, ok := m.all[pkgToken+"/"+n+":nvidia-container-toolkit"]; ok {
				t.Errorf("%s has no NVIDIA GPU but gets the toolkit", n)
			}
		}
		if _, ok := m.all[manifestToken+"/nvidia-device-plugin"]; ok {
			t.Error("the device plugin is declared while the inventory leaves it off")
		}
	}
}

func TestDevicePluginWhenEnabled(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.GPU.DevicePlugin.Enabled = true
		inv.Nodes[3].GPUs = nil // gpu-1: one plugin for the cluster, whichever workers have GPUs
	})
	r := m.get(t, manifestToken, "nvidia-device-plugin")
	if !strings.HasSuffix(r.parent, "homelab:cluster:Cluster::homelab") {
		t.Errorf("device plugin parent %s", r.parent)
	}
	// Its pods name the RuntimeClass; the DaemonSet controller places
	// them as GPU workers join.
	if !dependsOn(r, "homelab:index:Manifest", "runtimeclass-nvidia") || !dependsOn(r, "homelab:index:KubeadmInit", "homelab") {
		t.Errorf("device plugin applied before the cluster and its RuntimeClass: %v", r.deps)
	}
	in := r.inputs
	if in["kind"].StringValue() != "daemonset" || in["name"].StringValue() != gpu.DevicePluginName || in["namespace"].StringValue() != gpu.DevicePluginNamespace {
		t.Errorf("object %v", in)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict([]byte(in["content"].StringValue()), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.present"] != "true" || *ds.Spec.Template.Spec.RuntimeClassName != gpu.RuntimeClassName {
		t.Errorf("device plugin not bound to GPU nodes: %+v", ds.Spec.Template.Spec)
	}
	n := 0
	for k := range m.all {
		if strings.HasPrefix(k, manifestToken+"/nvidia-device-plugin") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d device plugin manifests, want one for the cluster", n)
	}
}
