package kubepkg

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

func load(t *testing.T, packages string) *inventory.Inventory {
	t.Helper()
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: "v1.34.4"}}
	if packages != "" {
		inv.Cluster.Packages.Manage = true
		inv.Cluster.Packages.Repository = packages
	}
	inv.ApplyDefaults()
	return inv
}

func TestSources(t *testing.T) {
	got := string(Sources("https://pkgs.k8s.io/core:/stable:/v1.34/deb/"))
	// kubeadm's install guide, byte for byte, below our header.
	const want = "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /\n"
	lines := strings.SplitAfter(got, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "#") || lines[1] != want || lines[2] != "" {
		t.Errorf("sources list:\n%s", got)
	}
}

func TestFor(t *testing.T) {
	if _, ok := For(load(t, ""), nil); ok {
		t.Error("an install when cluster.packages.manage is false")
	}
	inv := load(t, inventory.DefaultPackagesRepository)
	in, ok := For(inv, nil)
	if !ok {
		t.Fatal("no install")
	}
	if in.Version != "1.34.4" || !slices.Equal(in.Packages, []string{"kubeadm", "kubelet", "kubectl"}) {
		t.Errorf("packages %v at %q", in.Packages, in.Version)
	}
	if in.KeyURL != "https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key" || in.Key != nil {
		t.Errorf("key %q %v", in.KeyURL, in.Key)
	}
	if in.Keyring != KeyringPath || in.SourcesPath != SourcesPath || !bytes.Contains(in.Sources, []byte(" https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /\n")) {
		t.Errorf("repository %+v", in)
	}
	// A mirror with its own key: the key is uploaded, nothing fetched.
	inv = load(t, "http://10.77.0.1/core:/stable:/{minor}/deb/")
	inv.Cluster.KubernetesVersion = "v1.35.4"
	key := []byte{0x99, 0, 1, 4}
	in, _ = For(inv, key)
	if in.KeyURL != "" || !bytes.Equal(in.Key, key) || in.Version != "1.35.4" || in.Repository != "http://10.77.0.1/core:/stable:/v1.35/deb/" {
		t.Errorf("mirror install %+v", in)
	}
	key[0] = 0
	if in.Key[0] != 0x99 {
		t.Error("the install shares the caller's key buffer")
	}
}
