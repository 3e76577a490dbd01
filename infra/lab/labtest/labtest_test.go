package labtest

import (
	"strings"
	"testing"
)

func TestEngineTailNamesTheFailedResources(t *testing.T) {
	out := strings.Join([]string{
		"Updating (homelab):",
		"Diagnostics:",
		"  homelab:index:KubeadmJoin (gpu-4):",
		"    error: gpu-4: kubeadm join: exit 1",
		"    line two of the error",
		"",
		"  homelab:index:Package (gpu-1:nvidia-container-toolkit):",
		"    warning: no NVIDIA GPU detected",
		"",
		"  homelab:index:Dataplane (dataplane):",
		"    waiting for the pod network: cni plugin not initialized: Network plugin returns error: none",
		"",
		"  pulumi:pulumi:Stack (homelab-cluster-homelab):",
		"    error: update failed",
		"",
		"Outputs:",
		"    endpoint: \"10.77.0.100:6443\"",
		"",
		"Resources:",
		"    + 114 created",
		"    2 errored",
	}, "\n")
	got := EngineTail(out, 3)
	_, failed, ok := strings.Cut(got, "resources that failed:\n")
	if !ok {
		t.Fatalf("no failed resources in:\n%s", got)
	}
	for _, want := range []string{"KubeadmJoin (gpu-4)", "line two of the error", "Stack (homelab-cluster-homelab)"} {
		if !strings.Contains(failed, want) {
			t.Errorf("failed resources lack %q:\n%s", want, failed)
		}
	}
	if strings.Contains(failed, "NVIDIA") || strings.Contains(failed, "Outputs") || strings.Contains(failed, "Dataplane") {
		t.Errorf("failed resources hold more than the errors:\n%s", failed)
	}
	if !strings.HasPrefix(got, "Resources:\n    + 114 created\n    2 errored\n") {
		t.Errorf("tail is not the last 3 lines:\n%s", got)
	}
	if strings.Contains(EngineTail("no diagnostics\n", 5), "resources that failed") {
		t.Error("output without diagnostics grew a failed section")
	}
}
