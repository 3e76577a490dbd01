package program

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

func requires(m *mocks, t *testing.T, node string) []string {
	var out []string
	for _, v := range m.get(t, "homelab:index:Host", node).inputs["requires"].ArrayValue() {
		out = append(out, v.StringValue())
	}
	return out
}

// The shipped homelab manages the Kubernetes packages (an upgrade needs
// them managed); with manage: false they are the user's: no Package for
// them, and every Host requires them.
func TestKubernetesPackagesLeftToTheUser(t *testing.T) {
	inv, _, err := inventory.Load("../../inventory/homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Cluster.Packages.Manage {
		t.Error("inventory/homelab.yaml leaves the Kubernetes packages to the user")
	}
	m := runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.Packages.Manage = false })
	for _, n := range []string{"cp-1", "gpu-1"} {
		if _, ok := m.all[pkgToken+"/"+n+":kubernetes"]; ok {
			t.Errorf("%s gets a Kubernetes Package the inventory does not ask for", n)
		}
		if !slices.Contains(requires(m, t, n), "kubeadm") {
			t.Errorf("%s's Host does not require kubeadm: %v", n, requires(m, t, n))
		}
	}
}

func TestKubernetesPackagesManaged(t *testing.T) {
	key := []byte{0x99, 0, 1, 4}
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.Packages.Manage = true
	}, func(cfg *Config) { cfg.PackagesKeyring = key })
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		r := m.get(t, pkgToken, n+":kubernetes")
		in := r.inputs
		var names []string
		for _, v := range in["names"].ArrayValue() {
			names = append(names, v.StringValue())
		}
		if !slices.Equal(names, kubepkg.Packages) || in["pinnedVersion"].StringValue() != "1.34.4" || !in["anyRevision"].BoolValue() || in["keepVersion"].StringValue() == "" || in["enable"].StringValue() != "kubelet" {
			t.Errorf("%s: %v at %v", n, names, in["pinnedVersion"])
		}
		repo := in["repository"].ObjectValue()
		if !strings.Contains(repo["sources"].StringValue(), "[signed-by="+kubepkg.KeyringPath+"] https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /") {
			t.Errorf("%s: sources %q", n, repo["sources"].StringValue())
		}
		if repo["key"].StringValue() != base64.StdEncoding.EncodeToString(key) || repo.HasValue("keyURL") {
			t.Errorf("%s: the inventory's keyring is not uploaded: %v", n, repo)
		}
		if !dependsOn(r, "homelab:index:Host", n) {
			t.Errorf("%s's packages do not wait for its Host", n)
		}
		// The Host no longer requires what the Package installs.
		if req := requires(m, t, n); slices.Contains(req, "kubeadm") || !slices.Contains(req, "apt-get") {
			t.Errorf("%s's Host requires %v", n, req)
		}
		// Every file, and through them kubeadm, waits for the packages
		// (which wait for the upgrade), except keepalived's and the CA
		// its check reads: they say nothing of the Kubernetes version,
		// and wait for the node's own Host alone, not every node's.
		files := 0
		for _, f := range m.all {
			if f.token == "homelab:index:File" && strings.HasPrefix(f.name, n+":") {
				files++
				path := strings.TrimPrefix(f.name, n+":")
				early := strings.HasPrefix(n, "cp-") && (strings.Contains(path, "keepalived") || path == "/etc/kubernetes/pki/ca.crt")
				switch {
				case early && (dependsOn(f, pkgToken, n+":kubernetes") || !dependsOn(f, "homelab:index:Host", n)):
					t.Errorf("%s waits for more than %s's Host: %v", f.name, n, f.deps)
				case !early && !dependsOn(f, pkgToken, n+":kubernetes"):
					t.Errorf("%s does not wait for %s's packages", f.name, n)
				}
			}
		}
		if files == 0 {
			t.Errorf("%s has no files", n)
		}
	}
	if init := m.get(t, "homelab:index:KubeadmInit", "homelab"); !dependsOn(init, "homelab:index:File", "cp-1:/etc/kubernetes/kubeadm/init.yaml") {
		t.Error("init no longer waits for its config")
	}
	if !slices.Contains(requires(m, t, "cp-1"), "keepalived") {
		t.Error("cp-1's Host lost keepalived")
	}
}

// Without a keyring the nodes fetch the repository's key, as kubeadm's
// guide does.
func TestKubernetesPackagesFetchTheirKey(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) { inv.Cluster.Packages.Manage = true })
	repo := m.get(t, pkgToken, "gpu-1:kubernetes").inputs["repository"].ObjectValue()
	if repo["keyURL"].StringValue() != "https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key" || repo.HasValue("key") {
		t.Errorf("repository %v", repo)
	}
}

// NewConfig reads the keyring once, and a bad one stops the run naming
// the field, before any resource exists.
func TestNewConfigReadsTheKeyring(t *testing.T) {
	dir := t.TempDir()
	inv, _, err := inventory.Load("../../inventory/homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inv.Cluster.Packages.Manage = true
	inv.Cluster.Packages.Keyring = filepath.Join(dir, "k.gpg")
	os.WriteFile(inv.Cluster.Packages.Keyring, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n"), 0o644)
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, nil, 0o644)
	if _, err := NewConfig(inv, nil, "", known, nil); err == nil || !strings.HasPrefix(err.Error(), "cluster.packages.keyring") {
		t.Errorf("an armoured keyring: %v", err)
	}
	os.WriteFile(inv.Cluster.Packages.Keyring, []byte{0x99, 0, 1, 4}, 0o644)
	cfg, err := NewConfig(inv, nil, "", known, nil)
	if err != nil || len(cfg.PackagesKeyring) != 4 {
		t.Errorf("%v %v", cfg.PackagesKeyring, err)
	}
	inv.Cluster.Packages.Manage = false
	os.Remove(inv.Cluster.Packages.Keyring)
	if _, err := NewConfig(inv, nil, "", known, nil); err != nil {
		t.Errorf("an unmanaged inventory's keyring was read: %v", err)
	}
}
