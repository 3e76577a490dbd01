package lab

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/homelab-dev/homelab/infra/hostkeys"
)

// newKey returns an ed25519 key as an OpenSSH private key file and an
// authorized_keys line.
func newKey(comment string) (private []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if comment != "" {
		line += " " + comment
	}
	return pem.EncodeToMemory(block), line, nil
}

// ensureClientKey makes the provisioner's key once; kept disks trust it.
func (l *Lab) ensureClientKey() (string, error) {
	if err := os.MkdirAll(l.sshDir(), 0o700); err != nil {
		return "", err
	}
	if data, err := os.ReadFile(l.KeyPath()); err == nil {
		signer, err := ssh.ParsePrivateKey(data)
		if err != nil {
			return "", fmt.Errorf("lab client key %s: %w", l.KeyPath(), err)
		}
		return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " homelab-lab", nil
	}
	priv, pub, err := newKey("homelab-lab")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(l.KeyPath()+".pub", []byte(pub+"\n"), 0o644); err != nil {
		return "", err
	}
	return pub, os.WriteFile(l.KeyPath(), priv, 0o600)
}

// Signer returns the lab's client key for Go SSH clients.
func (l *Lab) Signer() (ssh.Signer, error) {
	data, err := os.ReadFile(l.KeyPath())
	if err != nil {
		return nil, err
	}
	return ssh.ParsePrivateKey(data)
}

// knownHostsLine is a node's host key under its address and name.
func knownHostsLine(s *State, n *NodeState) (hosts []string, line string, ok bool) {
	f := strings.Fields(n.HostKey)
	if len(f) < 2 {
		return nil, "", false
	}
	hosts = []string{knownhosts.Normalize(net.JoinHostPort(n.Address, strconv.Itoa(s.SSHPort))), knownhosts.Normalize(net.JoinHostPort(n.Name, strconv.Itoa(s.SSHPort)))}
	return hosts, strings.Join(hosts, ",") + " " + f[0] + " " + f[1], true
}

// writeLabKnownHosts is the lab's own record of every node's current host
// key (`homelab-lab ssh` and the lab's SSH checks use it): the lab made
// the machines and knows their keys.
func (l *Lab) writeLabKnownHosts(s *State) error {
	var lines []string
	for _, n := range s.Nodes {
		if _, line, ok := knownHostsLine(s, n); ok {
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	return writeAtomic(l.labKnownHostsPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// recordInstalledHosts adds to the provisioner's known_hosts (the file
// inventory/lab.yaml's ssh.knownHosts names) the keys of nodes it has no
// entry for: what an operator records when installing machines. An entry
// it has is never changed: a replaced machine's new key must be accepted
// (`homelab hosts accept`), as on a real homelab.
func (l *Lab) recordInstalledHosts(s *State) error {
	data, err := os.ReadFile(l.KnownHostsPath())
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var add []string
	for _, n := range s.Nodes {
		hosts, line, ok := knownHostsLine(s, n)
		if !ok {
			continue
		}
		known, err := hostkeys.Known(l.KnownHostsPath(), hosts)
		if err != nil {
			return err
		}
		if len(known) == 0 {
			add = append(add, line)
		}
	}
	if len(add) == 0 {
		return nil
	}
	sort.Strings(add)
	out := strings.TrimRight(string(data), "\n")
	if out != "" {
		out += "\n"
	}
	return writeAtomic(l.KnownHostsPath(), []byte(out+strings.Join(add, "\n")+"\n"), 0o644)
}

// followAddress moves a node's entries in the provisioner's known_hosts to
// its current address, with the key the file already trusts for it (its
// host key did not change; only the address did).
func (l *Lab) followAddress(s *State, n *NodeState) error {
	hosts, _, ok := knownHostsLine(s, n)
	if !ok {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(n.HostKey))
	if err != nil {
		return err
	}
	known, err := hostkeys.Known(l.KnownHostsPath(), []string{hosts[1]})
	if err != nil {
		return err
	}
	if len(known) > 0 && known[0] != ssh.FingerprintSHA256(pub) {
		// The file trusts another key for this name (a replaced machine
		// not accepted yet): leave it for the user.
		return nil
	}
	return hostkeys.Replace(l.KnownHostsPath(), hosts, pub)
}

func writeAtomic(p string, data []byte, mode os.FileMode) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
