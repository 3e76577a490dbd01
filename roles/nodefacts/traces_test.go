package nodefacts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

// The provider's shell state check and adopt's Go check over
// PresenceScript's findings are both made from Leftovers: on every tree
// they must say the same, and what kubeadm's traces mean.
func TestLeftoversAgree(t *testing.T) {
	initFiles := CompletionFiles(true, true)
	for _, tc := range []struct {
		name  string
		paths []string
		want  string // StateScript's answer for an init
	}{
		{"a blank node", nil, StateNone},
		{"the bundle's CAs only (written before kubeadm runs)", []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key", "/etc/kubernetes/kubeadm/init.yaml"}, StateNone},
		{"a marker alone", []string{InitMarker}, StateNone},
		{"an empty manifests directory", []string{ManifestsDir + "/"}, StateNone},
		{"a manifests directory without manifests", []string{ManifestsDir + "/README"}, StateNone},
		{"one static pod manifest", []string{Manifest(Etcd)}, StatePartial},
		{"kubelet.conf", []string{KubeletConf}, StatePartial},
		{"kubelet.conf a directory", []string{KubeletConf + "/"}, StateNone},
		{"admin.conf", []string{AdminConf}, StatePartial},
		{"an etcd member's data", []string{EtcdMemberDir + "/snap/db"}, StatePartial},
		{"an etcd data directory without a member", []string{EtcdDataDir + "/"}, StateNone},
		{"member a file, not etcd's directory", []string{EtcdMemberDir}, StateNone},
		{"an interrupted init: its files, no marker", initFiles[1:], StatePartial},
		{"a finished init", initFiles, StateSetUp},
		{"a finished init lacking a manifest", []string{InitMarker, AdminConf, Manifest(KubeAPIServer)}, StatePartial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.paths...)
			state := strings.TrimSpace(sh(t, stateScript(root, initFiles[:1], initFiles[1:])))
			if state != tc.want {
				t.Errorf("state script: %q, want %q", state, tc.want)
			}
			shellLeft := strings.TrimSpace(sh(t, "if "+leftoverTest(root)+"; then echo left; else echo clean; fi")) == "left"
			present := ParsePresence(sh(t, presenceScript(root, Files(initFiles...))))
			goLeft := HasLeftovers(present)
			if shellLeft != goLeft {
				t.Errorf("the shell test says leftovers %v, the Go check %v (present %v)", shellLeft, goLeft, present)
			}
			if wantLeft := tc.want != StateNone; goLeft != wantLeft {
				t.Errorf("leftovers %v, want %v", goLeft, wantLeft)
			}
			for _, f := range initFiles {
				onDisk := false
				if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Mode().IsRegular() {
					onDisk = true
				}
				if present[f] != onDisk {
					t.Errorf("%s: present %v, on disk %v", f, present[f], onDisk)
				}
			}
		})
	}
}

// The node's scripts are the same generators at the node's root.
func TestScriptsAtTheNodesRoot(t *testing.T) {
	if StateScript([]string{JoinMarker}, KubeletConf) != stateScript("", []string{JoinMarker}, []string{KubeletConf}) ||
		PresenceScript(Files(CAKey)...) != presenceScript("", Files(CAKey)) || LeftoverTest() != leftoverTest("") {
		t.Error("a node's script differs from the tested one")
	}
	if strings.Contains(LeftoverTest(), "''") {
		t.Errorf("an empty root left quotes behind: %s", LeftoverTest())
	}
}

func TestParsePresenceIgnoresNoise(t *testing.T) {
	got := ParsePresence("Welcome to cp-1\npresent=" + AdminConf + "\npresent=\n" + KubeletConf + "\n")
	if len(got) != 1 || !got[AdminConf] {
		t.Errorf("got %v", got)
	}
}
