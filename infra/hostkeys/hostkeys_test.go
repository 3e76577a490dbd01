package hostkeys

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

func key(t *testing.T, seed byte) gossh.PublicKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	pk, err := gossh.NewPublicKey(ed25519.NewKeyFromSeed(s).Public())
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func TestReplace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "known_hosts")
	old, other, fresh := key(t, 1), key(t, 2), key(t, 3)
	hosts := Hosts("cp-1", "10.0.0.5", 22)
	lines := "10.0.0.5,cp-1 " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(old))) + "\n" +
		"10.0.0.6,cp-2 " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other))) + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := Known(file, hosts); !slices.Equal(got, []string{gossh.FingerprintSHA256(old)}) {
		t.Fatalf("known %v", got)
	}
	if err := Replace(file, hosts, fresh); err != nil {
		t.Fatal(err)
	}
	if got, _ := Known(file, hosts); !slices.Equal(got, []string{gossh.FingerprintSHA256(fresh)}) {
		t.Errorf("after replace: %v", got)
	}
	if got, _ := Known(file, Hosts("cp-2", "10.0.0.6", 22)); !slices.Equal(got, []string{gossh.FingerprintSHA256(other)}) {
		t.Errorf("another node's key was touched: %v", got)
	}
}
