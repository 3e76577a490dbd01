package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files an inventory names are found relative to the inventory, whatever
// the working directory: the Pulumi CLI runs the program in another folder.
func TestLoadResolvesPathsAgainstTheInventory(t *testing.T) {
	data, err := os.ReadFile("homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "privateKey: ~/.ssh/id_ed25519", "privateKey: keys/id_ed25519", 1)
	s = strings.Replace(s, "knownHosts: ~/.ssh/known_hosts", "knownHosts: /etc/ssh/ssh_known_hosts", 1)
	s = strings.Replace(s, "  kubeProxy:", "  cilium: {chart: ../charts/cilium.tgz}\n  kubeProxy:", 1)
	s = strings.Replace(s, "    manage: true", "    keyring: apt/k8s.gpg", 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "site", "inv.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	inv, _, err := Load(filepath.Join("..", filepath.Base(dir), "site", "inv.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "site", "keys", "id_ed25519"); inv.SSH.PrivateKey != want {
		t.Errorf("ssh.privateKey %q, want %q", inv.SSH.PrivateKey, want)
	}
	if inv.SSH.KnownHosts != "/etc/ssh/ssh_known_hosts" {
		t.Errorf("ssh.knownHosts %q", inv.SSH.KnownHosts)
	}
	if want := filepath.Join(dir, "charts", "cilium.tgz"); inv.Cluster.Cilium.Chart != want {
		t.Errorf("cluster.cilium.chart %q, want %q", inv.Cluster.Cilium.Chart, want)
	}
	if want := filepath.Join(dir, "site", "apt", "k8s.gpg"); inv.Cluster.Packages.Keyring != want {
		t.Errorf("cluster.packages.keyring %q, want %q", inv.Cluster.Packages.Keyring, want)
	}
}

func TestResolvePath(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	cwd, _ := os.Getwd()
	for _, c := range []struct{ in, dir, want string }{
		{"", "/inv", ""},
		{"~/.ssh/id", "/inv", filepath.Join(home, ".ssh/id")},
		{"/abs/./k", "/inv", "/abs/k"},
		{"k", "/inv", "/inv/k"},
		{"../k", "/inv/site", "/inv/k"},
		{"k", "", filepath.Join(cwd, "k")},
	} {
		if got := ResolvePath(c.in, c.dir); got != c.want {
			t.Errorf("ResolvePath(%q, %q) = %q, want %q", c.in, c.dir, got, c.want)
		}
	}
}
