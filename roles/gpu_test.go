package roles

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// gpuInventory is the shipped homelab with the device plugin on, gpu-2's GPU
// taint made its own (another value and effect) and gpu-3 tainted besides.
func gpuInventory(t testing.TB) *inventory.Inventory {
	t.Helper()
	inv := layoutInventory(t, inventory.LayoutVIP)
	inv.Cluster.GPU.DevicePlugin.Enabled = true
	for i := range inv.Nodes {
		switch inv.Nodes[i].Name {
		case "gpu-2":
			inv.Nodes[i].Taints = []string{"nvidia.com/gpu=shared:PreferNoSchedule"}
		case "gpu-3":
			inv.Nodes[i].Taints = []string{"dedicated=ml:NoExecute"}
		}
	}
	if _, err := inventory.Validate(inv); err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestRenderGPU compares the device plugin DaemonSet and the toolkit's apt
// sources with their golden copies under testdata/TestRenderGPU.
func TestRenderGPU(t *testing.T) {
	inv := gpuInventory(t)
	r, err := Render(inv, testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, f := range r.Cluster {
		if f.Path == gpu.DevicePluginPath {
			got[filepath.Join("_cluster", f.Path)] = f.Content
		}
	}
	n, _ := inv.Node("gpu-1")
	tk, ok := gpu.ToolkitFor(inv, n)
	if !ok {
		t.Fatal("gpu-1 gets no toolkit")
	}
	got[filepath.Join("gpu-1", tk.SourcesPath)] = tk.Sources
	if len(got) != 2 {
		t.Fatalf("device plugin not rendered: %v", r.Cluster)
	}
	root := filepath.Join("testdata", t.Name())
	for p, c := range got {
		dst := filepath.Join(root, p)
		if *update {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, c, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(dst)
		if err != nil {
			t.Fatalf("%v (run go test ./roles -update)", err)
		}
		if !bytes.Equal(c, want) {
			t.Errorf("%s differs from golden (run go test ./roles -update and review the diff):\n%s", p, c)
		}
	}
}

// The device plugin's contract, read back as the typed object the API
// server will see: GPU nodes only, every GPU node's taint tolerated, the
// nvidia runtime, the pinned image.
func TestDevicePluginSchedulesOnGPUNodesOnly(t *testing.T) {
	inv := gpuInventory(t)
	inv.Cluster.GPU.DevicePlugin.Version = "v0.20.1"
	r, err := Render(inv, testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Cluster, func(f file.File) bool { return f.Path == gpu.DevicePluginPath })
	if i < 0 {
		t.Fatal("no device plugin rendered")
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(r.Cluster[i].Content, &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if ds.Namespace != gpu.DevicePluginNamespace || ds.Name != gpu.DevicePluginName {
		t.Errorf("object %s/%s", ds.Namespace, ds.Name)
	}
	if len(spec.NodeSelector) != 1 || spec.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("nodeSelector %v", spec.NodeSelector)
	}
	if spec.RuntimeClassName == nil || *spec.RuntimeClassName != gpu.RuntimeClassName {
		t.Errorf("runtimeClassName %v", spec.RuntimeClassName)
	}
	if got := spec.Containers[0].Image; got != "nvcr.io/nvidia/k8s-device-plugin:v0.20.1" {
		t.Errorf("image %s", got)
	}
	type ke struct{ key, effect string }
	var tol []ke
	for _, t := range spec.Tolerations {
		if t.Operator == corev1.TolerationOpExists {
			tol = append(tol, ke{t.Key, string(t.Effect)})
		}
	}
	want := []ke{{"dedicated", "NoExecute"}, {"nvidia.com/gpu", "NoSchedule"}, {"nvidia.com/gpu", "PreferNoSchedule"}}
	if !slices.Equal(tol, want) {
		t.Errorf("tolerations %v, want %v", tol, want)
	}
	sel := ds.Spec.Selector.MatchLabels
	for k, v := range sel {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %v does not match the pod labels %v", sel, ds.Spec.Template.Labels)
		}
	}

	inv.Cluster.GPU.DevicePlugin.Enabled = false
	r, _ = Render(inv, testBundle(t))
	if slices.ContainsFunc(r.Cluster, func(f file.File) bool { return f.Path == gpu.DevicePluginPath }) {
		t.Error("device plugin rendered while disabled")
	}
}
