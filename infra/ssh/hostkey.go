package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyChangedError means known_hosts lists keys for the host and the host
// showed a different one. It is never retried or accepted automatically.
type HostKeyChangedError struct {
	Node       string
	Host       string   // as known_hosts names it: "10.0.0.5" or "[10.0.0.5]:2222"
	KnownHosts string   // the known_hosts file
	Want       []string // SHA256 fingerprints known_hosts has for Host
	Lines      []int    // the known_hosts lines those keys are on
	Got        string   // SHA256 fingerprint of the key the host showed
	GotType    string   // its type, e.g. "ssh-ed25519"
}

func (e *HostKeyChangedError) Error() string {
	lines := make([]string, len(e.Lines))
	for i, l := range e.Lines {
		lines[i] = strconv.Itoa(l)
	}
	return fmt.Sprintf("ssh %s: HOST KEY CHANGED for %s: it showed %s key %s, but %s (line %s) has %s. "+
		"This happens when the machine was reinstalled or its disk or hardware swapped, and it is also what a man-in-the-middle attack looks like; "+
		"nothing was sent to the host. If the change is expected, verify the new fingerprint out of band (on the machine: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), "+
		"then accept it explicitly: remove the old entry with `ssh-keygen -R '%s' -f '%s'` and add the new key",
		e.Node, e.Host, e.GotType, e.Got, e.KnownHosts, strings.Join(lines, ", "), strings.Join(e.Want, ", "),
		e.Host, e.KnownHosts)
}

// UnknownHostError means known_hosts has no key for the host. Hosts are
// never trusted on first use: an operator (or the tool that created the
// machine and knows its key) must add it.
type UnknownHostError struct {
	Node       string
	Host       string // as known_hosts would name it
	KnownHosts string
	Got        string // SHA256 fingerprint of the key the host showed
	GotType    string
}

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("ssh %s: UNKNOWN HOST %s: %s has no key for it (it showed %s key %s); "+
		"homelab never trusts a host on first use: verify that fingerprint out of band (on the machine: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), "+
		"then add the host's key to %s explicitly (e.g. with ssh-keyscan, comparing the fingerprint first)",
		e.Node, e.Host, e.KnownHosts, e.GotType, e.Got, e.KnownHosts)
}

// hostKeys checks a host's key against a known_hosts file.
type hostKeys struct {
	node, file string
	check      gossh.HostKeyCallback
	// algos are the host key algorithms known_hosts has keys for. Offering
	// only these makes a host with several keys show one we can check,
	// rather than whichever type the client prefers.
	algos []string
	// accepted is the fingerprint of the key the host showed and
	// known_hosts vouched for.
	accepted string
}

// probeKey is a key that no known_hosts holds: checking it against the file
// fails with a KeyError that lists every key the file has for the host.
var probeKey, _ = gossh.NewPublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public())

type probeAddr string

func (a probeAddr) Network() string { return "tcp" }
func (a probeAddr) String() string  { return string(a) }

func loadHostKeys(node, file, addr string) (*hostKeys, error) {
	if file == "" {
		return nil, fmt.Errorf("ssh %s: no known_hosts file: host keys are always verified", node)
	}
	check, err := knownhosts.New(file)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: known_hosts: %w", node, err)
	}
	h := &hostKeys{node: node, file: file, check: check}
	var ke *knownhosts.KeyError
	if err := check(addr, probeAddr(addr), probeKey); errors.As(err, &ke) {
		for _, k := range ke.Want {
			for _, a := range algorithmsFor(k.Key.Type()) {
				if !slices.Contains(h.algos, a) {
					h.algos = append(h.algos, a)
				}
			}
		}
	}
	// No known key (an unknown host, or one known only through
	// @cert-authority) leaves algos empty: the client's defaults apply and
	// the handshake's check decides.
	return h, nil
}

// algorithmsFor maps a key type to the signature algorithms that prove it.
func algorithmsFor(keyType string) []string {
	if keyType == gossh.KeyAlgoRSA {
		// SHA-1 "ssh-rsa" signatures are left out: every supported sshd
		// speaks the SHA-2 ones.
		return []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256}
	}
	return []string{keyType}
}

// callback turns knownhosts' errors into typed ones that say what to do.
func (h *hostKeys) callback(hostname string, remote net.Addr, key gossh.PublicKey) error {
	err := h.check(hostname, remote, key)
	if err == nil {
		h.accepted = gossh.FingerprintSHA256(key)
		return nil
	}
	host := knownhosts.Normalize(hostname)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("ssh %s: host %s showed %s key %s, which %s:%d marks @revoked; refusing to connect",
			h.node, host, key.Type(), gossh.FingerprintSHA256(key), re.Revoked.Filename, re.Revoked.Line)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return &UnknownHostError{Node: h.node, Host: host, KnownHosts: h.file,
			Got: gossh.FingerprintSHA256(key), GotType: key.Type()}
	case errors.As(err, &ke):
		e := &HostKeyChangedError{Node: h.node, Host: host, KnownHosts: h.file,
			Got: gossh.FingerprintSHA256(key), GotType: key.Type()}
		for _, k := range ke.Want {
			e.Want = append(e.Want, gossh.FingerprintSHA256(k.Key))
			e.Lines = append(e.Lines, k.Line)
		}
		return e
	}
	return fmt.Errorf("ssh %s: checking host key of %s: %w", h.node, host, err)
}

// AuthFailed reports whether err is the server refusing every key offered:
// the host answered and its key was verified, but it does not accept ours.
// golang.org/x/crypto/ssh reports this only in words.
func AuthFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ssh: unable to authenticate")
}
