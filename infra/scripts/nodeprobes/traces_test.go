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

// tree makes a file tree below a temporary root: a path ending in / is a
// directory, any other a file.
func tree(t *testing.T, paths ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The provider's shell state check and adopt's Go check over the
// presence probe's findings are both made from nodefacts.Leftovers: on
// every tree they must say the same, and what kubeadm's traces mean.
func TestLeftoversAgree(t *testing.T) {
	initFiles := nodefacts.CompletionFiles(true, true)
	for _, tc := range []struct {
		name  string
		paths []string
		want  string // the state script's answer for an init
	}{
		{"a blank node", nil, nodefacts.StateNone},
		{"the bundle's CAs only (written before kubeadm runs)", []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key", "/etc/kubernetes/kubeadm/init.yaml"}, nodefacts.StateNone},
		{"a marker alone", []string{nodefacts.InitMarker}, nodefacts.StateNone},
		{"an empty manifests directory", []string{nodefacts.ManifestsDir + "/"}, nodefacts.StateNone},
		{"a manifests directory without manifests", []string{nodefacts.ManifestsDir + "/README"}, nodefacts.StateNone},
		{"one static pod manifest", []string{nodefacts.Manifest(nodefacts.Etcd)}, nodefacts.StatePartial},
		{"kubelet.conf", []string{nodefacts.KubeletConf}, nodefacts.StatePartial},
		{"kubelet.conf a directory", []string{nodefacts.KubeletConf + "/"}, nodefacts.StateNone},
		{"admin.conf", []string{nodefacts.AdminConf}, nodefacts.StatePartial},
		{"an etcd member's data", []string{nodefacts.EtcdMemberDir + "/snap/db"}, nodefacts.StatePartial},
		{"an etcd data directory without a member", []string{nodefacts.EtcdDataDir + "/"}, nodefacts.StateNone},
		{"member a file, not etcd's directory", []string{nodefacts.EtcdMemberDir}, nodefacts.StateNone},
		{"an interrupted init: its files, no marker", initFiles[1:], nodefacts.StatePartial},
		{"a finished init", initFiles, nodefacts.StateSetUp},
		{"a finished init lacking a manifest", []string{nodefacts.InitMarker, nodefacts.AdminConf, nodefacts.Manifest(nodefacts.KubeAPIServer)}, nodefacts.StatePartial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.paths...)
			for _, shell := range shells {
				state := strings.TrimSpace(run(t, shell, StateAt(root, initFiles[:1], initFiles[1:]...).Script()))
				if state != tc.want {
					t.Errorf("%s: state script: %q, want %q", shell, state, tc.want)
				}
				// With a marker no node has, the state script's answer is
				// its leftover test alone.
				shellLeft := strings.TrimSpace(run(t, shell, StateAt(root, []string{"/no/such/marker"}).Script())) == nodefacts.StatePartial
				present := nodefacts.ParsePresence(run(t, shell, PresenceAt(root, nodefacts.Files(initFiles...)...).Script()))
				goLeft := nodefacts.HasLeftovers(present)
				if shellLeft != goLeft {
					t.Errorf("%s: the shell test says leftovers %v, the Go check %v (present %v)", shell, shellLeft, goLeft, present)
				}
				if wantLeft := tc.want != nodefacts.StateNone; goLeft != wantLeft {
					t.Errorf("%s: leftovers %v, want %v", shell, goLeft, wantLeft)
				}
				for _, f := range initFiles {
					onDisk := false
					if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Mode().IsRegular() {
						onDisk = true
					}
					if present[f] != onDisk {
						t.Errorf("%s: %s: present %v, on disk %v", shell, f, present[f], onDisk)
					}
				}
			}
		})
	}
}

// A trace alone is a script whose exit status is its answer.
func TestTrace(t *testing.T) {
	root := tree(t, nodefacts.AdminConf, nodefacts.EtcdMemberDir+"/", nodefacts.Manifest(nodefacts.Etcd))
	for _, tc := range []struct {
		trace nodefacts.Trace
		there bool
	}{
		{nodefacts.Trace{Path: nodefacts.AdminConf}, true},
		{nodefacts.Trace{Path: nodefacts.KubeletConf}, false},
		{nodefacts.Trace{Path: nodefacts.EtcdMemberDir, Kind: nodefacts.Dir}, true},
		{nodefacts.Trace{Path: nodefacts.EtcdMemberDir}, false},
		{nodefacts.Trace{Path: nodefacts.AnyManifest, Kind: nodefacts.AnyMatch}, true},
		{nodefacts.Trace{Path: nodefacts.KubernetesDir + "/none/*.yaml", Kind: nodefacts.AnyMatch}, false},
	} {
		for _, shell := range shells {
			err := exec.Command(shell, "-c", scripts.Render("nodefacts/trace", TraceAt(root, tc.trace)).String()).Run()
			if (err == nil) != tc.there {
				t.Errorf("%s: %+v: %v, want there %v", shell, tc.trace, err, tc.there)
			}
		}
	}
}
