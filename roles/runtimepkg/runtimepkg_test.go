package runtimepkg

import (
	"reflect"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

func pinned(p *inventory.RuntimePackages) *inventory.Inventory {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: "v1.35.4"}}
	inv.Cluster.ContainerRuntime = inventory.ContainerRuntime{Manage: true, Packages: p}
	inv.ApplyDefaults()
	return inv
}

// The distribution's: runc, then the containerd that runs it, from the
// node's own sources; a version without a revision pins any revision.
func TestForTheDistributions(t *testing.T) {
	in, ok := For(pinned(&inventory.RuntimePackages{Containerd: "1.6.20~ds1", Runc: "1.1.5+ds1-1+deb12u1"}), nil)
	if !ok || in.Repository != nil || len(in.Packages) != 2 {
		t.Fatalf("%+v %v", in, ok)
	}
	if got := in.Packages; !reflect.DeepEqual(got, []Package{{Name: "runc", Version: "1.1.5+ds1-1+deb12u1"}, {Name: "containerd", Version: "1.6.20~ds1", AnyRevision: true}}) {
		t.Errorf("packages %+v", got)
	}
	inv := pinned(&inventory.RuntimePackages{Containerd: "1.7.28"})
	inv.Cluster.ContainerRuntime.Manage = false
	if _, ok := For(inv, nil); ok {
		t.Error("an install for a runtime up does not manage")
	}
	if _, ok := For(pinned(nil), nil); ok {
		t.Error("an install without pins")
	}
}

// Docker's: containerd.io alone, from a sources list trusting only its
// keyring, as Docker's install guide writes it; the key fetched from the
// repository's top, or the one the inventory names uploaded.
func TestForDockers(t *testing.T) {
	repo := &inventory.RuntimeRepository{URL: "https://download.docker.com/linux/ubuntu/", Suite: "noble"}
	in, ok := For(pinned(&inventory.RuntimePackages{Containerd: "2.2.1-1", Repository: repo}), nil)
	if !ok || !reflect.DeepEqual(in.Packages, []Package{{Name: DockerPackage, Version: "2.2.1-1", Replaces: []string{"containerd", "runc"}}}) {
		t.Fatalf("%+v %v", in, ok)
	}
	r := in.Repository
	const line = "deb [signed-by=/etc/apt/keyrings/docker.gpg] https://download.docker.com/linux/ubuntu/ noble stable\n"
	if lines := strings.SplitAfter(string(r.Sources), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "#") || lines[1] != line {
		t.Errorf("sources list:\n%s", r.Sources)
	}
	if r.KeyURL != "https://download.docker.com/linux/ubuntu/gpg" || r.Key != nil || r.SourcesPath != SourcesPath || r.Keyring != KeyringPath {
		t.Errorf("repository %+v", r)
	}
	in, _ = For(pinned(&inventory.RuntimePackages{Containerd: "2.2.1", Repository: repo}), []byte{0x99, 1})
	if in.Repository.KeyURL != "" || string(in.Repository.Key) != "\x99\x01" || !in.Packages[0].AnyRevision {
		t.Errorf("with the inventory's keyring: %+v", in)
	}
}
