package image

import (
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

func install(t *testing.T, root string, files []File) {
	t.Helper()
	for _, f := range files {
		if !filepath.IsAbs(f.Path) {
			t.Fatalf("%s: path must be absolute", f.Path)
		}
		full := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, f.Content, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
}

func argv(t *testing.T, p unitfile.Paths, name string) []string {
	t.Helper()
	u, err := unitfile.Load(p, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Warnings) > 0 {
		t.Errorf("%s: %v", name, u.Warnings)
	}
	if len(u.ExecStart) != 1 {
		t.Fatalf("%s: %d ExecStart commands", name, len(u.ExecStart))
	}
	env, err := unitfile.ReadEnvFiles(p, u.EnvironmentFiles)
	if err != nil {
		t.Fatal(err)
	}
	return unitfile.ExpandArgs(u.ExecStart[0].Words, unitfile.EnvMap(unitfile.MergeEnv(u.Environment, env)))
}

// TestKubeletAsKubeadmRunsIt loads the packaged units the way init does and
// checks the kubelet command line before and after kubeadm writes its flags.
func TestKubeletAsKubeadmRunsIt(t *testing.T) {
	root := t.TempDir()
	install(t, root, Files())
	p := unitfile.Paths{Root: root}

	base := []string{"/usr/bin/kubelet",
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml"}
	if got := argv(t, p, "kubelet"); !reflect.DeepEqual(got, base) {
		t.Fatalf("before kubeadm:\n got %q\nwant %q", got, base)
	}
	install(t, root, []File{{Path: "/var/lib/kubelet/kubeadm-flags.env", Mode: 0o644,
		Content: []byte(`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"` + "\n")}})
	want := append(base, "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
		"--pod-infra-container-image=registry.k8s.io/pause:3.10")
	if got := argv(t, p, "kubelet"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after kubeadm:\n got %q\nwant %q", got, want)
	}
	if st, _ := unitfile.IsEnabled(p, "kubelet"); st != "disabled" {
		t.Errorf("kubelet is %q before anyone enables it", st)
	}
	if got := argv(t, p, "containerd"); !reflect.DeepEqual(got, []string{"/usr/bin/containerd"}) {
		t.Errorf("containerd: %q", got)
	}
}

// TestKeepalivedFlags combines the host's Debian unit with our defaults.
func TestKeepalivedFlags(t *testing.T) {
	unit, err := os.ReadFile("/lib/systemd/system/keepalived.service")
	if err != nil {
		toolstest.Missing(t, "keepalived is not installed on this machine: apt-get install keepalived")
	}
	root := t.TempDir()
	install(t, root, append(Files(), File{Path: "/lib/systemd/system/keepalived.service", Mode: 0o644, Content: unit}))
	got := strings.Join(argv(t, unitfile.Paths{Root: root}, "keepalived"), " ")
	if want := "/usr/sbin/keepalived --dont-fork -l -D -p /run/keepalived.pid -r /run/vrrp.pid -c /run/checkers.pid"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
