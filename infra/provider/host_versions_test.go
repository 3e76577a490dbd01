package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// TestVersionScriptRunsOnlyChangedTools runs the facts' version lines in
// real shells (dash and bash), with a kubeadm and a kubelet that count their runs: the
// first read runs both; a read with the stamps it recorded runs neither
// and keeps their versions; a kubeadm replaced the way dpkg replaces it
// (a new file renamed over the old) is run again, whatever its size.
func TestVersionScriptRunsOnlyChangedTools(t *testing.T) {
	for _, shell := range []string{"sh", "bash"} {
		t.Run(shell, func(t *testing.T) { versionScriptRuns(t, shell) })
	}
}

func versionScriptRuns(t *testing.T, shell string) {
	bin, runs := t.TempDir(), t.TempDir()
	tool := func(name, version string) string {
		return "#!/bin/sh\necho run >> " + filepath.Join(runs, name) + "\necho " + version + "\n"
	}
	install := func(name, script string) {
		tmp := filepath.Join(bin, "."+name+".new")
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	install("kubeadm", tool("kubeadm", "v1.34.4"))
	install("kubelet", tool("kubelet", "Kubernetes v1.34.4"))
	count := func(name string) int {
		data, _ := os.ReadFile(filepath.Join(runs, name))
		return strings.Count(string(data), "run")
	}
	read := func(prev HostState) HostState {
		t.Helper()
		cmd := exec.Command(shell, "-c", versionsAfter(prev).Script().String())
		// Only the stand-ins and what the script itself needs.
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("version script: %v\n%s", err, out)
		}
		st := HostState{Versions: map[string]string{}, Stamps: map[string]string{}}
		st.parseFacts(string(out))
		return st
	}

	first := read(HostState{})
	if first.Versions["kubeadm"] != "v1.34.4" || first.Versions["kubelet"] != "v1.34.4" {
		t.Fatalf("versions %v", first.Versions)
	}
	if first.Stamps["kubeadm"] == "" || !strings.HasPrefix(first.Stamps["kubeadm"], filepath.Join(bin, "kubeadm")+" ") {
		t.Fatalf("stamps %v", first.Stamps)
	}
	if count("kubeadm") != 1 || count("kubelet") != 1 {
		t.Fatalf("runs: kubeadm %d, kubelet %d", count("kubeadm"), count("kubelet"))
	}

	again := read(first)
	if count("kubeadm") != 1 || count("kubelet") != 1 {
		t.Errorf("unchanged tools were run again: kubeadm %d, kubelet %d", count("kubeadm"), count("kubelet"))
	}
	if again.Versions["kubeadm"] != "v1.34.4" || again.Versions["kubelet"] != "v1.34.4" || again.Stamps["kubeadm"] != first.Stamps["kubeadm"] {
		t.Errorf("versions %v stamps %v, want the first read's", again.Versions, again.Stamps)
	}

	// The same size on purpose: the new inode and change time tell.
	install("kubeadm", tool("kubeadm", "v1.35.4"))
	upgraded := read(again)
	if count("kubeadm") != 2 || upgraded.Versions["kubeadm"] != "v1.35.4" {
		t.Errorf("the replaced kubeadm: %d runs, version %q", count("kubeadm"), upgraded.Versions["kubeadm"])
	}
	if count("kubelet") != 1 || upgraded.Versions["kubelet"] != "v1.34.4" {
		t.Errorf("the kubelet: %d runs, version %q", count("kubelet"), upgraded.Versions["kubelet"])
	}

	// A tool removed has no version and no stamp, whatever was recorded.
	if err := os.Remove(filepath.Join(bin, "kubelet")); err != nil {
		t.Fatal(err)
	}
	gone := read(upgraded)
	if v, ok := gone.Versions["kubelet"]; ok {
		t.Errorf("a removed kubelet still has version %q", v)
	}
	if _, ok := gone.Stamps["kubelet"]; ok {
		t.Error("a removed kubelet still has a stamp")
	}
}

// The facts and versions scripts as a refresh renders them, checked by
// their goldens: the versions with two tools known from an earlier read.
func TestHostScripts(t *testing.T) {
	prev := HostState{
		Stamps:   map[string]string{"kubeadm": "/usr/bin/kubeadm 1 2 3 4", "kubelet": "/usr/bin/kubelet 5 6 7 8"},
		Versions: map[string]string{"kubeadm": "v1.34.4", "kubelet": "v1.34.4"},
	}
	scriptstest.Golden(t, versionsAfter(prev).Script(), "known")
	facts := nodeFacts
	facts.Versions, facts.Requires = versionsAfter(HostState{}), []string{"kubeadm", "keepalived"}
	scriptstest.Golden(t, facts.Script(), "")
	facts.RuntimeDump = true
	scriptstest.Golden(t, facts.Script(), "runtime")
}
