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

// writeKnownHosts lists every node's host key under its address and name,
// as the provisioner (and `homelab lab ssh`) verify them.
func (l *Lab) writeKnownHosts(s *State) error {
	var lines []string
	for _, n := range s.Nodes {
		if n.HostKey == "" {
			continue
		}
		f := strings.Fields(n.HostKey)
		if len(f) < 2 {
			continue
		}
		hosts := []string{knownhosts.Normalize(net.JoinHostPort(n.Address, strconv.Itoa(s.SSHPort))), knownhosts.Normalize(net.JoinHostPort(n.Name, strconv.Itoa(s.SSHPort)))}
		lines = append(lines, strings.Join(hosts, ",")+" "+f[0]+" "+f[1])
	}
	sort.Strings(lines)
	tmp := l.KnownHostsPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.KnownHostsPath())
}
