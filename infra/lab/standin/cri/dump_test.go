package cri

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/homelab-dev/homelab/roles/containerd"
)

// `containerd config dump` on a stand-in node prints what it runs, and
// no subcommand starts a second server on the node's socket.
func TestConfigDump(t *testing.T) {
	dump := func(config string) (containerd.Effective, []byte) {
		t.Helper()
		cfg := filepath.Join(t.TempDir(), "config.toml")
		os.WriteFile(cfg, []byte(config), 0o644)
		r, w, _ := os.Pipe()
		stdout := os.Stdout
		os.Stdout = w
		code := Main([]string{"--config", cfg, "config", "dump"})
		os.Stdout = stdout
		w.Close()
		out, _ := io.ReadAll(r)
		if code != 0 {
			t.Fatalf("config dump: exit %d", code)
		}
		var e containerd.Effective
		if err := containerd.ParseDump(out, &e); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return e, out
	}
	// containerd's defaults: runc on cgroupfs, which the kubelet's
	// systemd driver does not match.
	e, out := dump("version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.9'\n")
	if e.Runtime != "runc" || e.SystemdCgroup || e.SandboxImage != "registry.k8s.io/pause:3.9" || e.RegistryConfigPath != "" {
		t.Errorf("dump read as %+v:\n%s", e, out)
	}
	if !bytes.Contains(out, []byte("version = 2")) {
		t.Errorf("not containerd 1.x's config version:\n%s", out)
	}
	// What homelab up writes.
	conf, err := containerd.Render(containerd.Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	// Its mirrors' directory shows as containerd's does, so doctor's
	// mirror row passes on a stand-in node as on a real one.
	if e, out := dump(string(conf)); !e.SystemdCgroup || e.SandboxImage != "registry.k8s.io/pause:3.10.1" || e.RegistryConfigPath != containerd.CertsD {
		t.Errorf("dump of homelab's config read as %+v:\n%s", e, out)
	}
	for _, args := range [][]string{{"config", "default"}, {"--address", "/tmp/x.sock", "oci-hook"}} {
		if code := Main(args); code == 0 {
			t.Errorf("containerd %v: exit 0", args)
		}
	}
}
