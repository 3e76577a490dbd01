package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackagesRepository(t *testing.T) {
	for _, c := range []struct{ version, repo, want string }{
		{"v1.34.4", "", "https://pkgs.k8s.io/core:/stable:/v1.34/deb/"},
		{"v1.35.0", "", "https://pkgs.k8s.io/core:/stable:/v1.35/deb/"},
		{"v1.34.4", "http://10.77.0.1/core:/stable:/{minor}/deb", "http://10.77.0.1/core:/stable:/v1.34/deb/"},
		{"v1.34.4", "https://mirror.home/kubernetes/{minor}/{minor}/", "https://mirror.home/kubernetes/v1.34/v1.34/"},
		{"v1.34.4", "file:/srv/mirror/fixed/", "file:/srv/mirror/fixed/"},
	} {
		inv := &Inventory{Cluster: Cluster{KubernetesVersion: c.version, Packages: Packages{Repository: c.repo}}}
		inv.ApplyDefaults()
		if got := inv.Cluster.PackagesRepository(); got != c.want {
			t.Errorf("%s %q: %q, want %q", c.version, c.repo, got, c.want)
		}
	}
	if m := (Cluster{KubernetesVersion: "latest"}).Minor(); m != "" {
		t.Errorf("minor of a non-version: %q", m)
	}
}

// A repository serving one minor is allowed (a mirror of one release) but
// said: the next minor's upgrade needs it edited too.
func TestPackagesRepositoryWithoutMinorWarns(t *testing.T) {
	data, err := os.ReadFile("homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "https://pkgs.k8s.io/core:/stable:/{minor}/deb/", "https://mirror.home/k8s-1.34/", 1)
	_, warnings, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(warnings); len(got) != 1 || got[0] != "cluster.packages.repository" {
		t.Errorf("warnings %q", got)
	}
}

func TestReadKeyring(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) Packages {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return Packages{Keyring: p}
	}
	// A v4 public-key packet, old format (gpg --export) and new format.
	for name, data := range map[string][]byte{
		"old-format.gpg": {0x99, 0x00, 0x33, 0x04},
		"new-format.gpg": {0xc6, 0x33, 0x04},
	} {
		if _, err := write(name, data).ReadKeyring(); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
	for name, data := range map[string][]byte{
		"empty.gpg":     {},
		"armoured.asc":  []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGM=\n-----END PGP PUBLIC KEY BLOCK-----\n"),
		"keybox.kbx":    append([]byte{0, 0, 0, 0x20, 1, 1, 0, 0}, []byte("KBXf\x00\x00\x00\x00")...),
		"signature.gpg": {0x89, 0x01, 0x33},
		"text.gpg":      []byte("deb https://pkgs.k8s.io/ /\n"),
	} {
		_, err := write(name, data).ReadKeyring()
		if err == nil {
			t.Errorf("%s accepted", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "cluster.packages.keyring: ") {
			t.Errorf("%s: the error does not start with the field: %v", name, err)
		}
	}
	if _, err := (Packages{Keyring: filepath.Join(dir, "missing.gpg")}).ReadKeyring(); err == nil {
		t.Error("a missing keyring was read")
	}
}
