package drill

import (
	"os"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/roles/impact"
)

func TestLayoutInventoryRefusesWhatTheInventoryCannotExpress(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LayoutInventory("../../inventory/lab.yaml", "dns", dir); err == nil || !strings.Contains(err.Error(), "cluster.endpoint.dnsName") {
		t.Errorf("dns without dnsName: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused layout wrote %d file(s)", len(entries))
	}
	path, inv, err := LayoutInventory("../../inventory/lab.yaml", "single-ip", dir)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Endpoint() != "10.77.0.120:6443" {
		t.Errorf("single-ip endpoint %s", inv.Endpoint())
	}
	if _, _, err := LayoutInventory(path, "single-ip", t.TempDir()); err != nil {
		t.Errorf("the written inventory does not load again: %v", err)
	}
}

func TestCompareFindsEveryDifference(t *testing.T) {
	consumers := []impact.Consumer{
		{ID: "kubectl", Address: "10.77.0.120:6443"},
		{ID: "kubelet/gpu-1", Address: "10.77.0.120:6443"},
		{ID: "kubelet/cp-2", Address: "10.77.0.121:6443"},
	}
	o := impact.Outcome{Quorum: true, Writable: true, Cells: []impact.Cell{
		{Consumer: "kubectl", State: impact.Down},
		{Consumer: "kubelet/gpu-1", State: impact.Down},
		{Consumer: "kubelet/cp-2", State: impact.OK},
	}}
	r := &Result{
		Consumers: []Consumer{
			{ID: "kubectl", Address: "10.77.0.120:6443"},
			{ID: "kubelet/gpu-1", Address: "10.77.0.100:6443"},
			{ID: "kubelet/cp-2", Address: "10.77.0.121:6443"},
		},
		Cells:  map[string]string{"kubectl": impact.Down, "kubelet/gpu-1": impact.Down, "kubelet/cp-2": impact.Down},
		Quorum: true, Writable: false,
	}
	got := map[string]bool{}
	for _, m := range Compare(o, consumers, r) {
		got[m.Consumer] = true
	}
	for _, want := range []string{"kubelet/gpu-1", "kubelet/cp-2", "writable"} {
		if !got[want] {
			t.Errorf("no mismatch reported for %s", want)
		}
	}
	if got["kubectl"] {
		t.Errorf("kubectl matched, yet a mismatch was reported")
	}
}
