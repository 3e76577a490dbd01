package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// homeWithKeys makes a home directory holding the files homelab.yaml names
// (~/.ssh/id_ed25519 and ~/.ssh/known_hosts) and points HOME at it.
func homeWithKeys(t *testing.T) string {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	for _, f := range []string{"id_ed25519", "known_hosts"} {
		if err := os.WriteFile(filepath.Join(home, ".ssh", f), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	return home
}

// validate checks that the files the inventory names exist, every missing
// one reported at once with its field and the path it resolved to
// (relative paths against the inventory's directory), together with the
// inventory's other problems.
func TestValidateReportsMissingFiles(t *testing.T) {
	homeWithKeys(t)
	dir := t.TempDir()
	data, err := os.ReadFile(homelab)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "privateKey: ~/.ssh/id_ed25519, knownHosts: ~/.ssh/known_hosts", "privateKey: keys/id_ed25519, knownHosts: "+filepath.Join(dir, "known_hosts"), 1)
	s = strings.Replace(s, "  cni: cilium", "  cilium: {chart: charts/cilium.tgz}\n  cni: cilium", 1)
	s = strings.Replace(s, "    manage: true", "    manage: true\n    keyring: /nonexistent/keyring.gpg", 1)
	s = strings.Replace(s, "vip: 10.0.0.100", "vip: 10.0.0.999", 1)
	inv := filepath.Join(dir, "inv.yaml")
	os.WriteFile(inv, []byte(s), 0o644)

	_, stderr, code := run(t, "validate", "-f", inv)
	if code != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"ssh.privateKey", filepath.Join(dir, "keys", "id_ed25519"),
		"ssh.knownHosts", filepath.Join(dir, "known_hosts"),
		"cluster.cilium.chart", filepath.Join(dir, "charts", "cilium.tgz"),
		"cluster.packages.keyring", "/nonexistent/keyring.gpg",
		"cluster.endpoint.vip",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("%q is not in the report:\n%s", want, stderr)
		}
	}

	// Once the files are there, the inventory is valid but for the vip.
	for _, f := range []string{"keys/id_ed25519", "known_hosts", "charts/cilium.tgz"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
	}
	os.WriteFile(inv, []byte(strings.Replace(strings.Replace(s, "10.0.0.999", "10.0.0.100", 1), "\n    keyring: /nonexistent/keyring.gpg", "", 1)), 0o644)
	if _, stderr, code := run(t, "validate", "-f", inv); code != 0 {
		t.Errorf("with its files: exit %d, stderr %q", code, stderr)
	}
}

// up names every missing file before anything is created or run: no
// secrets bundle, no stack, no node reached.
func TestUpRefusesMissingFilesFirst(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	data, err := os.ReadFile(homelab)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "  cni: cilium", "  cilium: {chart: charts/cilium.tgz}\n  cni: cilium", 1)
	inv := filepath.Join(dir, "inv.yaml")
	os.WriteFile(inv, []byte(s), 0o644)
	state := filepath.Join(dir, "state")
	_, stderr, code := run(t, "up", "-f", inv, "--state-dir", state)
	if code == 0 {
		t.Fatal("up ran without its files")
	}
	for _, want := range []string{"ssh.privateKey", "ssh.knownHosts", "cluster.cilium.chart", filepath.Join(home, ".ssh", "id_ed25519")} {
		if !strings.Contains(stderr, want) {
			t.Errorf("%q is not in the refusal:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state directory was made before the refusal: %v", err)
	}
}
