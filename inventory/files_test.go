package inventory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Load reads an inventory whose files do not exist yet (the lab's, before
// `homelab-lab up` writes them); LoadWithFiles names each missing one with
// its line and the path it was read at, relative to the inventory.
func TestLoadWithFilesNamesEveryMissingFile(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "known_hosts"), 0o755)
	data, err := os.ReadFile("homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "privateKey: ~/.ssh/id_ed25519, knownHosts: ~/.ssh/known_hosts", "privateKey: keys/id, knownHosts: known_hosts", 1)
	s = strings.Replace(s, "  cni: cilium", "  cilium: {chart: cilium.tgz}\n  cni: cilium", 1)
	s = strings.Replace(s, "    manage: true           # up writes /etc/containerd", "    packages: {containerd: 2.2.1-1, repository: {url: https://download.docker.com/linux/debian, suite: bookworm, keyring: docker.gpg}}\n    manage: true           # up writes /etc/containerd", 1)
	path := filepath.Join(dir, "inv.yaml")
	os.WriteFile(path, []byte(s), 0o644)

	if _, _, err := Load(path); err != nil {
		t.Fatalf("Load looked at the files: %v", err)
	}
	_, _, err = LoadWithFiles(path)
	ps := Problems(err)
	if got := paths(ps); !slices.Equal(got, []string{"cluster.cilium.chart", "cluster.containerRuntime.packages.repository.keyring", "ssh.knownHosts", "ssh.privateKey"}) {
		t.Fatalf("reported %q\n%v", got, err)
	}
	for _, p := range ps {
		if p.Line == 0 {
			t.Errorf("%s: no line", p.Path)
		}
		switch p.Path {
		case "ssh.privateKey":
			if !strings.Contains(p.Message, filepath.Join(dir, "keys", "id")) || !strings.Contains(p.Message, "does not exist") {
				t.Errorf("%s: %s", p.Path, p.Message)
			}
		case "cluster.containerRuntime.packages.repository.keyring":
			if !strings.Contains(p.Message, filepath.Join(dir, "docker.gpg")) {
				t.Errorf("%s: %s", p.Path, p.Message)
			}
		case "ssh.knownHosts":
			if !strings.Contains(p.Message, "directory") {
				t.Errorf("%s: %s", p.Path, p.Message)
			}
		}
	}
}
