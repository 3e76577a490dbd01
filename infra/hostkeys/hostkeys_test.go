package hostkeys

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
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

// sshServer presents the host key of seed on loopback, and nothing more.
func sshServer(t *testing.T, seed byte) string {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	signer, err := gossh.NewSignerFromKey(ed25519.NewKeyFromSeed(s))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gossh.ServerConfig{NoClientAuth: false, PublicKeyCallback: func(gossh.ConnMetadata, gossh.PublicKey) (*gossh.Permissions, error) {
		return nil, errors.New("no")
	}}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { gossh.NewServerConn(c, cfg); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// Accept replaces the old key only with the one the user confirmed.
func TestAccept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "known_hosts")
	hosts := Hosts("gpu-1", "10.0.0.30", 22)
	old, fresh := key(t, 1), key(t, 3)
	os.WriteFile(file, []byte(knownhostsLine(hosts, old)), 0o644)
	addr := sshServer(t, 3)
	dial := (&net.Dialer{}).DialContext
	ctx := context.Background()

	wrong := gossh.FingerprintSHA256(key(t, 9))
	s, err := Accept(ctx, dial, file, hosts, addr, MatchFingerprint(wrong))
	if err == nil || s.Fingerprint != gossh.FingerprintSHA256(fresh) || !slices.Equal(s.Known, []string{gossh.FingerprintSHA256(old)}) {
		t.Fatalf("a fingerprint that is not the node's: %+v %v", s, err)
	}
	if got, _ := Known(file, hosts); !slices.Equal(got, []string{gossh.FingerprintSHA256(old)}) {
		t.Errorf("a refused key was written: %v", got)
	}
	if _, err := Accept(ctx, dial, file, hosts, addr, MatchFingerprint(gossh.FingerprintSHA256(fresh))); err != nil {
		t.Fatal(err)
	}
	if got, _ := Known(file, hosts); !slices.Equal(got, []string{gossh.FingerprintSHA256(fresh)}) {
		t.Errorf("after acceptance: %v", got)
	}
	s, err = Accept(ctx, dial, file, hosts, addr, func(Shown) error { t.Error("asked again for a trusted key"); return nil })
	if err != nil || !s.Trusted() {
		t.Errorf("an already trusted key: %+v %v", s, err)
	}
}

func knownhostsLine(hosts []string, k gossh.PublicKey) string {
	return strings.Join(hosts, ",") + " " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))) + "\n"
}
