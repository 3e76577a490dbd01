package hostkeys

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

func authorized(k gossh.PublicKey) string {
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))
}

// Replace swaps the node's plain entries only: @revoked and
// @cert-authority lines naming the node are the user's policy, not a key
// the node had, and dropping a @revoked line would trust a revoked key
// again. The file keeps its mode, and the rewrite goes through a temporary
// file of its own, never a fixed name another writer (or a planted
// symlink) may hold.
func TestReplaceKeepsMarkersModeAndOthersFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "known_hosts")
	old, revoked, ca, fresh := key(t, 1), key(t, 2), key(t, 4), key(t, 3)
	hosts := Hosts("cp-1", "10.0.0.5", 22)
	lines := []string{
		"# the lab's hosts",
		"10.0.0.5,cp-1 " + authorized(old),
		"@revoked 10.0.0.5,cp-1 " + authorized(revoked),
		"@cert-authority cp-1,*.home.arpa " + authorized(ca),
		"10.0.0.6,cp-2 " + authorized(old),
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	other := file + ".tmp"
	if err := os.WriteFile(other, []byte("another writer's file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Replace(file, hosts, fresh); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, keep := range []string{lines[0], lines[2], lines[3], lines[4]} {
		if !slices.Contains(got, keep) {
			t.Errorf("dropped %q:\n%s", keep, data)
		}
	}
	if slices.Contains(got, lines[1]) {
		t.Errorf("the old key stays:\n%s", data)
	}
	if k, _ := Known(file, hosts); !slices.Equal(k, []string{gossh.FingerprintSHA256(fresh)}) {
		t.Errorf("trusted after replace: %v (a @revoked or @cert-authority line is no trust in a host key)", k)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after replace: %v %v, want 0640 as before", fi.Mode().Perm(), err)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "another writer's file\n" {
		t.Errorf("%s, not ours, was overwritten or moved: %q %v", other, b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left in the directory: %v", entries)
	}
}

// A node presenting a key known_hosts revokes is refused before anyone is
// asked to confirm it.
func TestAcceptRefusesARevokedKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "known_hosts")
	hosts := Hosts("gpu-1", "10.0.0.30", 22)
	shown := key(t, 3)
	os.WriteFile(file, []byte("@revoked * "+authorized(shown)+"\n"), 0o644)
	addr := sshServer(t, 3)
	_, err := Accept(context.Background(), (&net.Dialer{}).DialContext, file, hosts, addr, func(Shown) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "@revoked") {
		t.Fatalf("a revoked key: %v", err)
	}
	if k, _ := Known(file, hosts); len(k) != 0 {
		t.Errorf("a revoked key was written: %v", k)
	}
}
