// Package hostkeys reads the SSH host key a machine presents and replaces
// its entries in a known_hosts file: the explicit acceptance of a
// reinstalled or replaced machine, which homelab never does on its own.
package hostkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DialFunc opens a connection (from the emulated homelab's namespace, say).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Live makes an SSH handshake with addr up to the host key and stops
// there: no credential is offered to a host not trusted yet.
func Live(ctx context.Context, dial DialFunc, addr string) (gossh.PublicKey, error) {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var got gossh.PublicKey
	errStop := errors.New("host key read")
	_, _, _, err = gossh.NewClientConn(conn, addr, &gossh.ClientConfig{
		User: "homelab-hostkey-probe",
		HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
			got = key
			return errStop
		},
		// The types our nodes' known_hosts lines usually hold, best first.
		HostKeyAlgorithms: []string{gossh.KeyAlgoED25519, gossh.KeyAlgoECDSA256, gossh.KeyAlgoRSASHA512},
	})
	if got == nil {
		return nil, fmt.Errorf("no host key from %s: %v", addr, err)
	}
	return got, nil
}

// Known returns the SHA256 fingerprints file holds for any of hosts
// (known_hosts spellings: "10.0.0.5", "[10.0.0.5]:2222"): the keys it
// trusts for them, so not @revoked or @cert-authority lines.
func Known(file string, hosts []string) ([]string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if matches(line, hosts) {
			if _, _, pk, _, _, err := gossh.ParseKnownHosts([]byte(line)); err == nil {
				out = append(out, gossh.FingerprintSHA256(pk))
			}
		}
	}
	return out, nil
}

// revoked reports whether file has a @revoked line for key, whatever
// hosts it names: ssh refuses a revoked key for any host.
func revoked(file string, key gossh.PublicKey) (bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "@revoked") {
			continue
		}
		if marker, _, pk, _, _, err := gossh.ParseKnownHosts([]byte(line)); err == nil && marker == "revoked" && bytes.Equal(pk.Marshal(), key.Marshal()) {
			return true, nil
		}
	}
	return false, nil
}

// Replace rewrites file with every plain line naming one of hosts replaced
// by one line for key; every other line is kept as it is: other hosts',
// hashed ones, comments, and @revoked and @cert-authority lines, which are
// the user's policy rather than a key the node had. The file keeps its mode
// (a new one is 0600) and is written through a temporary file of its own
// in the same directory, renamed into place: a fixed temporary name could
// be another writer's, or a symlink planted to redirect the write.
func Replace(file string, hosts []string, key gossh.PublicKey) error {
	if target, err := filepath.EvalSymlinks(file); err == nil {
		file = target
	}
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(file); err == nil {
		mode = fi.Mode().Perm()
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line != "" && !matches(line, hosts) {
			kept = append(kept, line)
		}
	}
	kept = append(kept, knownhosts.Line(hosts, key))
	return renameio.WriteFile(file, []byte(strings.Join(kept, "\n")+"\n"), 0o600, renameio.WithStaticPermissions(mode))
}

// Hosts are the known_hosts names of a node reached at address:port.
func Hosts(name, address string, port int) []string {
	p := fmt.Sprint(port)
	return []string{knownhosts.Normalize(net.JoinHostPort(address, p)), knownhosts.Normalize(net.JoinHostPort(name, p))}
}

func matches(line string, hosts []string) bool {
	f := strings.Fields(line)
	if len(f) < 2 || strings.HasPrefix(f[0], "#") {
		return false
	}
	// A marker line (@revoked, @cert-authority) is no key the host had,
	// and never replaced with one.
	names := f[0]
	if strings.HasPrefix(names, "@") {
		return false
	}
	for _, h := range strings.Split(names, ",") {
		for _, want := range hosts {
			if h == want {
				return true
			}
		}
	}
	return false
}

// Shown is the key a node presents, next to what known_hosts has for it.
type Shown struct {
	Key         gossh.PublicKey
	Fingerprint string   // SHA256 of Key
	Known       []string // fingerprints file has for the node's hosts
}

// Trusted reports whether known_hosts already trusts exactly the shown key.
func (s Shown) Trusted() bool { return len(s.Known) == 1 && s.Known[0] == s.Fingerprint }

// Accept is `homelab hosts accept`: it reads the key the node presents at
// addr and, unless known_hosts already trusts exactly it, replaces every
// entry of hosts in file with it once confirm (which sees the key and the
// fingerprints known_hosts has) returns nil. Nothing is accepted silently.
func Accept(ctx context.Context, dial DialFunc, file string, hosts []string, addr string, confirm func(Shown) error) (Shown, error) {
	key, err := Live(ctx, dial, addr)
	if err != nil {
		return Shown{}, err
	}
	known, err := Known(file, hosts)
	if err != nil {
		return Shown{}, err
	}
	s := Shown{Key: key, Fingerprint: gossh.FingerprintSHA256(key), Known: known}
	if r, err := revoked(file, key); err != nil {
		return s, err
	} else if r {
		return s, fmt.Errorf("the node shows %s, a key %s marks @revoked: not accepted. If the revocation is wrong, remove that line yourself", s.Fingerprint, file)
	}
	if s.Trusted() {
		return s, nil
	}
	if err := confirm(s); err != nil {
		return s, err
	}
	return s, Replace(file, hosts, key)
}

// MatchFingerprint confirms only the key whose fingerprint is want: the one
// the user verified on the machine itself (ssh-keygen -lf on its console).
func MatchFingerprint(want string) func(Shown) error {
	return func(s Shown) error {
		if s.Fingerprint != want {
			return fmt.Errorf("refusing: the node shows %s, not the fingerprint you gave (%s): it is not the machine you checked", s.Fingerprint, want)
		}
		return nil
	}
}
