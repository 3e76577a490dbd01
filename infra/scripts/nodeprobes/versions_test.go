package nodeprobes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// TestVersionsScriptReadsManifests runs the script under sh and bash
// against manifests of kubeadm's shape below a temporary root.
func TestVersionsScriptReadsManifests(t *testing.T) {
	root := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - command:\n    - kube-apiserver\n    image: registry.k8s.io/kube-apiserver:v1.35.4\n    imagePullPolicy: IfNotPresent\n"
	if err := os.MkdirAll(filepath.Join(root, nodefacts.ManifestsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, nodefacts.Manifest(nodefacts.KubeAPIServer)), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each manifest's own first image, whatever the others say.
	scheduler := strings.NewReplacer("kube-apiserver", "kube-scheduler", "v1.35.4", "v1.34.4").Replace(manifest) + "  - image: sidecar:v9\n"
	if err := os.WriteFile(filepath.Join(root, nodefacts.Manifest(nodefacts.KubeScheduler)), []byte(scheduler), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, shell := range shells {
		out := run(t, shell, VersionsAt(root, "", "").Script())
		v := nodefacts.ParseVersions(out)
		if v.Components[nodefacts.KubeAPIServer] != "v1.35.4" || v.Components[nodefacts.KubeScheduler] != "v1.34.4" || len(v.Components) != 2 || v.Joined {
			t.Errorf("%s: read %+v from:\n%s", shell, v, out)
		}
	}
	// Its marker makes the node a member.
	write(t, root, nodefacts.JoinMarker, "")
	if v := nodefacts.ParseVersions(run(t, "sh", VersionsAt(root, "", "").Script())); !v.Joined {
		t.Errorf("a node with its join marker: %+v", v)
	}
}

// TestVersionsScriptKnowsTheKubelet runs the script in dash and bash with
// a kubelet that counts its runs: a first read runs it and records its
// stamp; a read knowing that stamp does not run it and keeps its
// version; a kubelet replaced the way dpkg replaces it runs again.
func TestVersionsScriptKnowsTheKubelet(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			root := t.TempDir()
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
			read := func(script scripts.Script) nodefacts.Versions {
				t.Helper()
				cmd := exec.Command(shell, "-c", script.String())
				cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				return nodefacts.ParseVersions(string(out))
			}

			if v := read(VersionsAt(root, "", "").Script()); v.Kubelet != "" || v.KubeletStamp != "" {
				t.Errorf("no kubelet read as %q, stamp %q", v.Kubelet, v.KubeletStamp)
			}
			install("v1.34.4")
			first := read(VersionsAt(root, "", "").Script())
			if first.Kubelet != "v1.34.4" || !strings.HasPrefix(first.KubeletStamp, filepath.Join(bin, "kubelet")+" ") || count() != 1 {
				t.Fatalf("first read: %q, stamp %q, %d runs", first.Kubelet, first.KubeletStamp, count())
			}
			again := read(VersionsAt(root, first.KubeletStamp, first.Kubelet).Script())
			if again.Kubelet != "v1.34.4" || again.KubeletStamp != first.KubeletStamp || count() != 1 {
				t.Errorf("read knowing the stamp: %q, stamp %q, %d runs", again.Kubelet, again.KubeletStamp, count())
			}
			install("v1.35.4") // the same size: the inode tells
			if v := read(VersionsAt(root, first.KubeletStamp, first.Kubelet).Script()); v.Kubelet != "v1.35.4" || count() != 2 {
				t.Errorf("the replaced kubelet: %q, %d runs", v.Kubelet, count())
			}
		})
	}
}
