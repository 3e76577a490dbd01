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
		out := run(t, shell, VersionsAt(root).Script())
		v := nodefacts.ParseVersions(out)
		if v.Components[nodefacts.KubeAPIServer] != "v1.35.4" || v.Components[nodefacts.KubeScheduler] != "v1.34.4" || len(v.Components) != 2 || v.Joined {
			t.Errorf("%s: read %+v from:\n%s", shell, v, out)
		}
	}
	// Its marker makes the node a member.
	write(t, root, nodefacts.JoinMarker, "")
	if v := nodefacts.ParseVersions(run(t, "sh", VersionsAt(root).Script())); !v.Joined {
		t.Errorf("a node with its join marker: %+v", v)
	}
}

// TestVersionsScriptKnowsTheTools runs the script in dash and bash with
// a kubelet and a containerd that count their runs: a first read runs
// them and records their stamps; a read knowing those stamps runs
// neither and keeps their versions; a tool replaced the way dpkg
// replaces it runs again, the other not.
func TestVersionsScriptKnowsTheTools(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			root := t.TempDir()
			bin, runs := t.TempDir(), filepath.Join(t.TempDir(), "runs")
			install := func(tool, output string) {
				tmp := filepath.Join(bin, "."+tool+".new")
				if err := os.WriteFile(tmp, []byte("#!/bin/sh\necho "+tool+" >> "+runs+"\necho "+output+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			count := func(tool string) int { data, _ := os.ReadFile(runs); return strings.Count(string(data), tool) }
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
			known := func(v nodefacts.Versions) []KnownVersion {
				return []KnownVersion{{"kubelet", v.KubeletStamp, v.Kubelet}, {"containerd", v.ContainerdStamp, v.Containerd}}
			}

			if v := read(VersionsAt(root).Script()); v.Kubelet != "" || v.KubeletStamp != "" || v.Containerd != "" {
				t.Errorf("no tools read as kubelet %q (stamp %q), containerd %q", v.Kubelet, v.KubeletStamp, v.Containerd)
			}
			install("kubelet", "Kubernetes v1.34.4")
			install("containerd", "containerd github.com/containerd/containerd 1.7.28 1.7.28-0ubuntu1")
			first := read(VersionsAt(root).Script())
			if first.Kubelet != "v1.34.4" || !strings.HasPrefix(first.KubeletStamp, filepath.Join(bin, "kubelet")+" ") || count("kubelet") != 1 {
				t.Fatalf("first read: %q, stamp %q, %d runs", first.Kubelet, first.KubeletStamp, count("kubelet"))
			}
			if first.Containerd != "1.7.28" || !strings.HasPrefix(first.ContainerdStamp, filepath.Join(bin, "containerd")+" ") || count("containerd") != 1 {
				t.Fatalf("first read: containerd %q, stamp %q, %d runs", first.Containerd, first.ContainerdStamp, count("containerd"))
			}
			again := read(VersionsAt(root, known(first)...).Script())
			if again.Kubelet != "v1.34.4" || again.KubeletStamp != first.KubeletStamp || again.Containerd != "1.7.28" || count("kubelet") != 1 || count("containerd") != 1 {
				t.Errorf("read knowing the stamps: %+v, %d and %d runs", again, count("kubelet"), count("containerd"))
			}
			install("containerd", "containerd github.com/containerd/containerd/v2 v2.2.9 1c4457e") // the inode tells
			if v := read(VersionsAt(root, known(first)...).Script()); v.Containerd != "v2.2.9" || v.Kubelet != "v1.34.4" || count("containerd") != 2 || count("kubelet") != 1 {
				t.Errorf("the replaced containerd: %+v, %d and %d runs", v, count("kubelet"), count("containerd"))
			}
		})
	}
}
