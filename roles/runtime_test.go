package roles

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// A managed runtime: every node's config.toml agrees with the kubelet
// (systemd cgroups, kubeadm's pause image) and restarts containerd; a GPU
// node's NVIDIA runtime is in that file, not in a drop-in containerd 1.x
// would let replace it. Unmanaged: no config.toml, the drop-in as before.
func TestManagedRuntime(t *testing.T) {
	for _, manage := range []bool{true, false} {
		inv := layoutInventory(t, "vip")
		inv.Cluster.ContainerRuntime.Manage = manage
		r, err := Render(inv, testBundle(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, nf := range r.Nodes {
			n := nf.Node
			var conf, dropIn []byte
			for _, f := range nf.Files {
				switch f.Path {
				case containerd.ConfigPath:
					conf = f.Content
					if f.Restarts != containerd.Unit {
						t.Errorf("%s: config.toml restarts %q", n.Name, f.Restarts)
					}
				case gpu.ContainerdDropInPath:
					dropIn = f.Content
				}
			}
			if !manage {
				if conf != nil || (dropIn != nil) != gpu.IsNvidia(n) {
					t.Errorf("unmanaged %s: config.toml %v, drop-in %v", n.Name, conf != nil, dropIn != nil)
				}
				continue
			}
			if conf == nil || dropIn != nil {
				t.Fatalf("managed %s: config.toml %v, drop-in %v", n.Name, conf != nil, dropIn != nil)
			}
			var eff containerd.Effective
			if err := containerd.ParseDump(conf, &eff); err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			if !eff.SystemdCgroup || eff.SandboxImage != kubeadm.PauseImage(inv.Cluster.KubernetesVersion) {
				t.Errorf("%s: SystemdCgroup %v, sandbox %q", n.Name, eff.SystemdCgroup, eff.SandboxImage)
			}
			var doc struct {
				Plugins map[string]struct {
					RestrictOOMScoreAdj bool `toml:"restrict_oom_score_adj"`
				} `toml:"plugins"`
			}
			if _, err := toml.Decode(string(conf), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Plugins["io.containerd.grpc.v1.cri"].RestrictOOMScoreAdj {
				t.Errorf("%s: restrict_oom_score_adj without cluster.containerRuntime.restrictOOMScoreAdj", n.Name)
			}
			if got := strings.Contains(string(conf), gpu.RuntimeBinary); got != gpu.IsNvidia(n) {
				t.Errorf("%s: NVIDIA runtime in config.toml %v, want %v", n.Name, got, gpu.IsNvidia(n))
			}
		}
	}
}

// A declared mirror: every node gets one hosts.toml per mirrored
// registry, sending its pulls to the mirror alone.
func TestRegistryMirrorFiles(t *testing.T) {
	inv := layoutInventory(t, "vip")
	inv.Cluster.Registry = inventory.Registry{Mirror: "http://10.0.0.2:5000", Mirrors: map[string]string{"ghcr.io": "https://ghcr.mirror.lan"}}
	r, err := Render(inv, testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, nf := range r.Nodes {
		got := map[string]string{}
		for _, f := range nf.Files {
			if strings.HasPrefix(f.Path, containerd.CertsD+"/") {
				got[f.Path] = string(f.Content)
				if f.Restarts != "" {
					t.Errorf("%s %s restarts %s: containerd reads it at each pull", nf.Node.Name, f.Path, f.Restarts)
				}
			}
		}
		for reg, url := range inv.Cluster.RegistryMirrors() {
			if c := got[containerd.HostsPath(reg)]; !strings.Contains(c, `server = "`+url+`"`) {
				t.Errorf("%s: %s's hosts.toml: %q", nf.Node.Name, reg, c)
			}
		}
		if len(got) != len(inventory.MirroredRegistries)+1 {
			t.Errorf("%s: %d hosts.toml files: %v", nf.Node.Name, len(got), got)
		}
	}
}
