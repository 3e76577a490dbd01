package containerd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// effectiveWithGPUDropIn is what containerd bin runs with a user's own
// configuration of its major (runc on systemd, kubeadm's sandbox, conf.d
// imported) and the NVIDIA drop-in up writes for a runtime it does not
// manage.
func effectiveWithGPUDropIn(t *testing.T, bin string, major int) containerd.Effective {
	t.Helper()
	data, err := containerd.Render(containerd.Config{Major: major, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	dropIn, ok := gpu.ContainerdDropIn(inventory.Node{Name: "gpu-1", GPUs: &inventory.GPUs{Vendor: "nvidia", Count: 1}})
	if !ok {
		t.Fatal("no drop-in for an NVIDIA node")
	}
	dir := t.TempDir()
	confD := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(confD, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confD, filepath.Base(gpu.ContainerdDropInPath)), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(data), containerd.ConfD, confD)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", cfg, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd refuses the configuration with the drop-in: %v\n%s", err, out)
	}
	var e containerd.Effective
	if err := containerd.ParseDump(out, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// The real containerd 2 takes the NVIDIA runtime from the drop-in and
// keeps the user's runc, cgroup driver and sandbox: the drop-in is how up
// adds the runtime to a containerd 2 it does not manage.
func TestContainerd2TakesTheGPUDropIn(t *testing.T) {
	e := effectiveWithGPUDropIn(t, containerd.RealContainerd2(t), 2)
	if e.Runtimes[gpu.RuntimeClassName] != gpu.RuntimeBinary || !e.SystemdCgroup || e.SandboxImage != "registry.k8s.io/pause:3.10.1" {
		t.Errorf("containerd 2 with the drop-in runs %+v", e)
	}
}

// The real containerd 1.6 loads the same drop-in (config version 3) when
// its configuration imports conf.d, and takes nothing from it: no
// runtime reaches a 1.x containerd by drop-in without replacing its CRI
// section (TestContainerd1ReplacesTheCRISectionOnImport). doctor's gpu
// runtime row names the fix; should a 1.x ever read it, this fails.
func TestContainerd1IgnoresTheGPUDropIn(t *testing.T) {
	e := effectiveWithGPUDropIn(t, containerd.RealContainerd1(t), 1)
	if _, ok := e.Runtimes[gpu.RuntimeClassName]; ok {
		t.Errorf("containerd 1.x took the %s runtime from the version 3 drop-in: %+v", gpu.RuntimeClassName, e)
	}
	if !e.SystemdCgroup || e.SandboxImage != "registry.k8s.io/pause:3.10.1" {
		t.Errorf("the drop-in changed the user's configuration: %+v", e)
	}
}
