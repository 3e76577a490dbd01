package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A detached run's output holds what kubeadm and apt print (join
// commands, tokens, certificate keys): it is readable by root only, while
// the command itself runs with the node's usual umask (a umask of 077
// leaking into apt or kubeadm would make the files they create unreadable
// to the services that need them). The start script runs here, in sh, as
// on a node.
func TestDetachedOutputIsPrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "runs", "kubeadm-init")
	script := detachedStart(d, "0123456789abcdef", "echo token abc.def; umask; touch "+quote(filepath.Join(filepath.Dir(d), "made")))
	if out, err := exec.Command("sh", "-c", "umask 022\n"+script).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "started" {
		t.Fatalf("start: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(d, "rc")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{d, filepath.Join(d, "out")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others can read a run's output", p, fi.Mode().Perm())
		}
	}
	out, _ := os.ReadFile(filepath.Join(d, "out"))
	if !strings.Contains(string(out), "token abc.def") || !strings.Contains(string(out), "0022") {
		t.Errorf("the command's output (with its umask): %q", out)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(d), "made")); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o644 {
		t.Errorf("a file the command made is %v, want 0644 (the node's umask)", fi.Mode().Perm())
	}
}
