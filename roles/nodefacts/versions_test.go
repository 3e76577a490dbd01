package nodefacts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersions(t *testing.T) {
	for _, tc := range []struct {
		name, out    string
		controlPlane string
		kubelet      string
		joined       bool
	}{
		{name: "a control-plane node", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:v1.34.4\nimage=kube-controller-manager registry.k8s.io/kube-controller-manager:v1.34.4\nimage=kube-scheduler registry.k8s.io/kube-scheduler:v1.34.4\nkubelet=Kubernetes v1.34.4\njoined=yes\n",
			controlPlane: "v1.34.4", kubelet: "v1.34.4", joined: true},
		{name: "an apply cut off after the apiserver", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:v1.35.4\nimage=kube-controller-manager registry.k8s.io/kube-controller-manager:v1.34.4\nimage=kube-scheduler my.registry:5000/kube-scheduler:v1.34.4\nkubelet=Kubernetes v1.34.4\njoined=yes",
			controlPlane: "v1.34.4", kubelet: "v1.34.4", joined: true},
		{name: "a worker", out: "kubelet=Kubernetes v1.35.4\njoined=yes\ncgroupfs=cgroup2fs", kubelet: "v1.35.4", joined: true},
		{name: "a fresh machine", out: "Welcome to Ubuntu\n"},
		{name: "a tag that is no version", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:latest\nkubelet=Kubernetes v1.34.4", kubelet: "v1.34.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ParseVersions(tc.out)
			if got := v.ControlPlane(); got != tc.controlPlane {
				t.Errorf("control plane %q, want %q", got, tc.controlPlane)
			}
			if v.Kubelet != tc.kubelet || v.Joined != tc.joined {
				t.Errorf("kubelet %q joined %v, want %q %v", v.Kubelet, v.Joined, tc.kubelet, tc.joined)
			}
		})
	}
}

// TestVersionsScriptReadsManifests runs the script under sh against a
// manifest kubeadm's shape, the paths rewritten into a temporary root.
func TestVersionsScriptReadsManifests(t *testing.T) {
	root := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - command:\n    - kube-apiserver\n    image: registry.k8s.io/kube-apiserver:v1.35.4\n    imagePullPolicy: IfNotPresent\n"
	if err := os.MkdirAll(filepath.Join(root, ManifestsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, Manifest(KubeAPIServer)), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each manifest's own first image, whatever the others say.
	scheduler := strings.NewReplacer("kube-apiserver", "kube-scheduler", "v1.35.4", "v1.34.4").Replace(manifest) + "  - image: sidecar:v9\n"
	if err := os.WriteFile(filepath.Join(root, Manifest(KubeScheduler)), []byte(scheduler), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(VersionsScript, KubernetesDir, filepath.Join(root, KubernetesDir))
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	v := ParseVersions(string(out))
	if v.Components[KubeAPIServer] != "v1.35.4" || v.Components[KubeScheduler] != "v1.34.4" || len(v.Components) != 2 || v.Joined {
		t.Errorf("read %+v from:\n%s", v, out)
	}
}

func TestClusterConfigVersion(t *testing.T) {
	cc := "apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.35.4\nnetworking:\n  podSubnet: 10.244.0.0/16\n"
	if got := ClusterConfigVersion(cc); got != "v1.35.4" {
		t.Errorf("got %q", got)
	}
	if got := ClusterConfigVersion("kind: ClusterConfiguration\n"); got != "" {
		t.Errorf("got %q from a config without a version", got)
	}
}

func TestParseVersionsCgroups(t *testing.T) {
	v := ParseVersions("kubelet=Kubernetes v1.34.4\njoined=yes\ncgroupfs=tmpfs\nfailcgroupv1=false\n")
	if !v.CgroupV1 || !v.KubeletAllowsCgroupV1 {
		t.Errorf("%+v", v)
	}
	if v := ParseVersions("cgroupfs=cgroup2fs\n"); v.CgroupV1 || v.KubeletAllowsCgroupV1 {
		t.Errorf("%+v", v)
	}
}

// TestVersionsScriptKnowsTheKubelet runs the script in dash and bash with
// a kubelet that counts its runs: a first read runs it and records its
// stamp; a read knowing that stamp does not run it and keeps its
// version; a kubelet replaced the way dpkg replaces it runs again.
func TestVersionsScriptKnowsTheKubelet(t *testing.T) {
	for _, shell := range []string{"sh", "bash"} {
		t.Run(shell, func(t *testing.T) {
			bin, runs := t.TempDir(), filepath.Join(t.TempDir(), "runs")
			install := func(version string) {
				tmp := filepath.Join(bin, ".kubelet.new")
				if err := os.WriteFile(tmp, []byte("#!/bin/sh\necho run >> "+runs+"\necho Kubernetes "+version+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(bin, "kubelet")); err != nil {
					t.Fatal(err)
				}
			}
			count := func() int { data, _ := os.ReadFile(runs); return strings.Count(string(data), "run") }
			read := func(script string) Versions {
				t.Helper()
				cmd := exec.Command(shell, "-c", script)
				cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				return ParseVersions(string(out))
			}

			if v := read(VersionsScript); v.Kubelet != "" || v.KubeletStamp != "" {
				t.Errorf("no kubelet read as %q, stamp %q", v.Kubelet, v.KubeletStamp)
			}
			install("v1.34.4")
			first := read(VersionsScript)
			if first.Kubelet != "v1.34.4" || !strings.HasPrefix(first.KubeletStamp, filepath.Join(bin, "kubelet")+" ") || count() != 1 {
				t.Fatalf("first read: %q, stamp %q, %d runs", first.Kubelet, first.KubeletStamp, count())
			}
			again := read(VersionsScriptFor(first.KubeletStamp, first.Kubelet))
			if again.Kubelet != "v1.34.4" || again.KubeletStamp != first.KubeletStamp || count() != 1 {
				t.Errorf("read knowing the stamp: %q, stamp %q, %d runs", again.Kubelet, again.KubeletStamp, count())
			}
			install("v1.35.4") // the same size: the inode tells
			if v := read(VersionsScriptFor(first.KubeletStamp, first.Kubelet)); v.Kubelet != "v1.35.4" || count() != 2 {
				t.Errorf("the replaced kubelet: %q, %d runs", v.Kubelet, count())
			}
		})
	}
}
