package aptrepo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// Key is the lab's repository signing key, kept with GnuPG in a home of
// its own. Keyring is its public half as apt's signed-by reads it
// (binary, what `gpg --dearmor` makes of the armoured Release.key).
type Key struct {
	dir string
	// link is a short path to the home while gpg runs (shortHome).
	link string
}

// KeyringName is the keyring's file name, as kubeadm's install guide names
// the one it dearmors.
var KeyringName = filepath.Base(kubepkg.KeyringPath)

const keyUID = "homelab emulated homelab apt repository <lab@homelab.invalid>"

// OpenKey returns the key kept in dir, generating it (Ed25519, signing
// only) the first time.
func OpenKey(dir string) (*Key, error) {
	k := &Key{dir: dir}
	if err := os.MkdirAll(k.home(), 0o700); err != nil {
		return nil, err
	}
	defer k.stopAgent()
	out, err := k.gpg(nil, "--list-secret-keys", "--with-colons")
	if err != nil || !bytes.Contains(out, []byte("\nsec:")) && !bytes.HasPrefix(out, []byte("sec:")) {
		if _, err := k.gpg(nil, "--passphrase", "", "--quick-gen-key", keyUID, "ed25519", "sign", "never"); err != nil {
			return nil, err
		}
	}
	pub, err := k.gpg(nil, "--export")
	if err != nil {
		return nil, err
	}
	armored, err := k.gpg(nil, "--armor", "--export")
	if err != nil {
		return nil, err
	}
	if len(pub) == 0 || len(armored) == 0 {
		return nil, fmt.Errorf("gpg exported no key from %s", k.home())
	}
	if err := os.WriteFile(k.Keyring(), pub, 0o644); err != nil {
		return nil, err
	}
	return k, os.WriteFile(k.Armored(), armored, 0o644)
}

func (k *Key) home() string { return filepath.Join(k.dir, "gnupg") }

// Keyring is the dearmored public key (what the inventory's
// cluster.packages.keyring names).
func (k *Key) Keyring() string { return filepath.Join(k.dir, KeyringName) }

// Armored is the public key as a repository publishes it (Release.key).
func (k *Key) Armored() string { return filepath.Join(k.dir, kubepkg.KeyFile) }

// Sign signs dir's Release as apt reads it: inline (InRelease) and
// detached (Release.gpg).
func (k *Key) Sign(dir string) error {
	defer k.stopAgent()
	rel := filepath.Join(dir, "Release")
	if _, err := k.gpg(nil, "--pinentry-mode", "loopback", "--passphrase", "", "--digest-algo", "SHA512", "--clearsign", "-o", filepath.Join(dir, "InRelease"), rel); err != nil {
		return err
	}
	_, err := k.gpg(nil, "--pinentry-mode", "loopback", "--passphrase", "", "--digest-algo", "SHA512", "--armor", "--detach-sign", "-o", filepath.Join(dir, "Release.gpg"), rel)
	return err
}

func (k *Key) gpg(stdin []byte, args ...string) ([]byte, error) {
	home, err := k.shortHome()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("gpg", append([]string{"--batch", "--no-tty", "--yes", "--quiet"}, args...)...)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("gpg %v: %w\n%s", args, err, stderr.Bytes())
	}
	return out, nil
}

// maxSocketHome is the longest GnuPG home whose agent sockets
// (S.gpg-agent.browser) still fit a unix socket's 108-byte path.
const maxSocketHome = 80

// shortHome is the GnuPG home as gpg is given it: the home itself, or,
// when its path is too long for the agent's sockets there (a machine
// without /run/user/UID keeps them in the home), a short link to it,
// removed with the agent.
func (k *Key) shortHome() (string, error) {
	if len(k.home()) <= maxSocketHome {
		return k.home(), nil
	}
	if k.link != "" {
		return filepath.Join(k.link, "h"), nil
	}
	dir, err := os.MkdirTemp("", "hlgpg")
	if err != nil {
		return "", err
	}
	if err := os.Symlink(k.home(), filepath.Join(dir, "h")); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	k.link = dir
	return filepath.Join(dir, "h"), nil
}

// stopAgent ends the gpg-agent gpg started for this home: nothing the
// lab starts outlives what it is for.
func (k *Key) stopAgent() {
	home, err := k.shortHome()
	if err != nil {
		return
	}
	cmd := exec.Command("gpgconf", "--kill", "all")
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
	_ = cmd.Run()
	if k.link != "" {
		os.RemoveAll(k.link)
		k.link = ""
	}
}
