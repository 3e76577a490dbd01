package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
)

// chartDir writes a chart whose agent image follows the values homelab
// renders (kubeProxyReplacement), as Cilium's chart switches on them.
func chartDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cilium")
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: cilium\nversion: 1.18.4\n",
		"values.yaml": "kubeProxyReplacement: false\n",
		"templates/agent.yaml": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cilium}
spec: {template: {spec: {containers: [{name: agent, image: "quay.io/cilium/cilium:v1.18.4{{ if .Values.kubeProxyReplacement }}-kpr{{ end }}"}]}}}
`,
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func shipped(t *testing.T, edit func(*inventory.Inventory)) *inventory.Inventory {
	t.Helper()
	inv, _, err := inventory.Load("../../inventory/homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edit(inv)
	return inv
}

func refsFor(imgs []Image, what string) []string {
	var out []string
	for _, i := range imgs {
		if i.For == what {
			out = append(out, i.Ref)
		}
	}
	return out
}

func TestListFollowsTheDeclaredCluster(t *testing.T) {
	chart := chartDir(t)
	for _, tc := range []struct {
		name      string
		edit      func(*inventory.Inventory)
		kubeProxy bool
		agent     string
		plugin    bool
	}{
		{"shipped, Cilium replacing kube-proxy", func(*inventory.Inventory) {}, false, "quay.io/cilium/cilium:v1.18.4-kpr", false},
		{"kube-proxy kept, device plugin on", func(inv *inventory.Inventory) {
			inv.Cluster.KubeProxy.Replacement = inventory.ReplacementNone
			inv.Cluster.GPU.DevicePlugin.Enabled = true
		}, true, "quay.io/cilium/cilium:v1.18.4", true},
		{"no Cilium", func(inv *inventory.Inventory) {
			inv.Cluster.KubeProxy.Replacement = inventory.ReplacementNone
			inv.Cluster.CNI = inventory.CNINone
		}, true, "", false},
	} {
		inv := shipped(t, func(inv *inventory.Inventory) {
			inv.Cluster.Cilium.Chart = chart
			tc.edit(inv)
		})
		imgs, warnings, err := List(inv, ListOptions{})
		if err != nil || len(warnings) > 0 {
			t.Fatalf("%s: %v, warnings %v", tc.name, err, warnings)
		}
		kubeadm := refsFor(imgs, ForKubeadm)
		if got := slices.Contains(kubeadm, "registry.k8s.io/kube-proxy:v1.34.4"); got != tc.kubeProxy {
			t.Errorf("%s: kube-proxy listed %v, want %v", tc.name, got, tc.kubeProxy)
		}
		if !slices.Contains(kubeadm, "registry.k8s.io/etcd:3.6.5-0") || !slices.Contains(kubeadm, "registry.k8s.io/pause:3.10.1") {
			t.Errorf("%s: kubeadm's images %v", tc.name, kubeadm)
		}
		var wantAgent []string
		if tc.agent != "" {
			wantAgent = []string{tc.agent}
		}
		if got := refsFor(imgs, ForCilium); !slices.Equal(got, wantAgent) {
			t.Errorf("%s: chart images %v, want %v", tc.name, got, wantAgent)
		}
		if got := refsFor(imgs, ForDevicePlugin); (len(got) == 1) != tc.plugin {
			t.Errorf("%s: device plugin images %v, want it listed %v", tc.name, got, tc.plugin)
		}
	}
	// A patch release not measured: listed, with a warning naming the way
	// to ask kubeadm itself.
	inv := shipped(t, func(inv *inventory.Inventory) {
		inv.Cluster.Cilium.Chart, inv.Cluster.KubernetesVersion = chart, "v1.34.2"
	})
	if _, warnings, err := List(inv, ListOptions{}); err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "--kubeadm") {
		t.Errorf("v1.34.2: %v, warnings %v", err, warnings)
	}
}

// Asked of the real kubeadm, the list is the same as the table's.
func TestListAsksKubeadm(t *testing.T) {
	bin := toolstest.RequireKube(t, "kubeadm", tools.KubernetesVersion)
	inv := shipped(t, func(inv *inventory.Inventory) { inv.Cluster.CNI = inventory.CNINone })
	asked, _, err := List(inv, ListOptions{Kubeadm: bin})
	if err != nil {
		t.Fatal(err)
	}
	table, _, err := List(inv, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, table) {
		t.Errorf("kubeadm lists %v; the table %v", asked, table)
	}
	if _, _, err := List(inv, ListOptions{Kubeadm: "/nonexistent/kubeadm"}); err == nil {
		t.Error("a missing kubeadm gave no error")
	}
}
