package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// resetIn renders kubeadm/reset with every path under root, as a node's
// filesystem there.
func resetIn(root string) resetArgs {
	at := func(p string) string { return filepath.Join(root, p) }
	return resetArgs{
		etcdAsideArgs: etcdAsideArgs{Member: at("var/lib/etcd/member"), AsideDir: at("var/lib/homelab/etcd-aside"),
			EtcdPattern: nodefacts.ProcessPattern("homelab-test-no-such-etcd"), AsidePrefix: asidePrefix},
		Manifests: at("etc/kubernetes/manifests"), KubeDir: at("etc/kubernetes"), MarkerGlob: at("etc/kubernetes/homelab-*.done"),
		Runs: at("var/lib/homelab/runs"), EtcdData: at("var/lib/etcd"), KubeletPKI: at("var/lib/kubelet/pki"),
	}
}

// The removal's reset, run by the real sh over real directories (no
// kubeadm, systemctl or etcd here: their absence is tolerated as a
// stopped service would be): the member data is moved aside and the rest
// goes; and when the data cannot be moved aside, nothing is deleted and
// the reset fails, since kubeadm reset would delete the data instead.
func TestResetKeepsEtcdDataOrStops(t *testing.T) {
	for _, asideBlocked := range []bool{false, true} {
		root := t.TempDir()
		in := resetIn(root)
		db := filepath.Join(in.Member, "snap", "db")
		for _, f := range []string{db, filepath.Join(in.Manifests, "etcd.yaml"), filepath.Join(in.KubeDir, "admin.conf")} {
			os.MkdirAll(filepath.Dir(f), 0o755)
			os.WriteFile(f, []byte("data"), 0o600)
		}
		if asideBlocked {
			// A file where the aside directory goes: mkdir fails, as on a
			// full or read-only disk.
			os.MkdirAll(filepath.Dir(in.AsideDir), 0o755)
			os.WriteFile(in.AsideDir, nil, 0o600)
		}
		cmd := exec.Command("sh", "-c", scripts.Render("kubeadm/reset", in).String())
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if asideBlocked {
			if err == nil {
				t.Errorf("aside blocked: the reset succeeded:\n%s", out)
			}
			if b, rerr := os.ReadFile(db); rerr != nil || string(b) != "data" {
				t.Errorf("aside blocked: the member data is gone: %v\n%s", rerr, out)
			}
			if _, serr := os.Stat(filepath.Join(in.Manifests, "etcd.yaml")); serr != nil {
				t.Errorf("aside blocked: the reset went on: %v", serr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("reset: %v\n%s", err, out)
		}
		var kept string
		for _, line := range strings.Split(string(out), "\n") {
			if dir, ok := strings.CutPrefix(line, asidePrefix); ok {
				kept = dir
			}
		}
		if b, err := os.ReadFile(filepath.Join(kept, "snap", "db")); kept == "" || err != nil || string(b) != "data" {
			t.Errorf("the member data is not where the reset says (%q): %v\n%s", kept, err, out)
		}
		for _, gone := range []string{in.EtcdData, filepath.Join(in.Manifests, "etcd.yaml"), filepath.Join(in.KubeDir, "admin.conf")} {
			if _, err := os.Stat(gone); !os.IsNotExist(err) {
				t.Errorf("%s survived the reset: %v", gone, err)
			}
		}
	}
}
