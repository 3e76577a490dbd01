package aptrepo

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// Write makes dir the flat repository of one minor, as pkgs.k8s.io lays
// it out: the packages under ARCH/, their index (Packages, Packages.gz),
// the Release listing the index's hashes, Release signed inline
// (InRelease) and apart (Release.gpg) with key, and the key itself
// (Release.key). It replaces what dir held.
func Write(dir, arch, minor string, debs []string, key *Key) error {
	return write(dir, arch, "Kubernetes "+minor, "kubeadm, kubelet and kubectl "+minor+", built from the lab's binaries", debs, key)
}

// WriteDistribution makes dir the flat repository the lab's real nodes
// take for their distribution's (DistributionPath): Debian's own
// packages, as the machine's apt downloaded them, laid out as Write does.
func WriteDistribution(dir, arch, suite string, debs []string, key *Key) error {
	return write(dir, arch, "Debian "+suite, "Debian "+suite+"'s packages the provisioner installs, as Debian built them", debs, key)
}

func write(dir, arch, label, description string, debs []string, key *Key) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tmp, arch), 0o755); err != nil {
		return err
	}
	stanzas, err := pool(tmp, arch, debs)
	if err != nil {
		return err
	}
	index, gz, err := packagesIndex(stanzas)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{{"Packages", index}, {"Packages.gz", gz}}
	release := fmt.Sprintf("Origin: homelab emulated homelab\nLabel: %s (emulated homelab)\nDate: %s\nArchitectures: %s\nDescription: %s\n",
		label, time.Now().UTC().Format(time.RFC1123), arch, description)
	md5s, sha256s := "MD5Sum:\n", "SHA256:\n"
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o644); err != nil {
			return err
		}
		m, s := md5.Sum(f.data), sha256.Sum256(f.data)
		md5s += fmt.Sprintf(" %x %d %s\n", m, len(f.data), f.name)
		sha256s += fmt.Sprintf(" %x %d %s\n", s, len(f.data), f.name)
	}
	release += md5s + sha256s
	if err := os.WriteFile(filepath.Join(tmp, "Release"), []byte(release), 0o644); err != nil {
		return err
	}
	if key != nil {
		if err := key.Sign(tmp); err != nil {
			return err
		}
		armored, err := os.ReadFile(key.Armored())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, kubepkg.KeyFile), armored, 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

type stanza struct{ key, text string }

// pool links each of debs (once per file name) into root/dir and returns
// their index entries, Filename relative to root.
func pool(root, dir string, debs []string) ([]stanza, error) {
	var stanzas []stanza
	seen := map[string]bool{}
	for _, deb := range debs {
		name := filepath.Base(deb)
		if seen[name] {
			continue
		}
		seen[name] = true
		rel := dir + "/" + name
		if err := linkOrCopy(deb, filepath.Join(root, rel), 0o644); err != nil {
			return nil, err
		}
		st, err := indexEntry(filepath.Join(root, rel), rel)
		if err != nil {
			return nil, err
		}
		stanzas = append(stanzas, st)
	}
	return stanzas, nil
}

// packagesIndex is a Packages index of stanzas, by file name, and its
// gzip.
func packagesIndex(stanzas []stanza) (index, gz []byte, err error) {
	sort.Slice(stanzas, func(i, j int) bool { return stanzas[i].key < stanzas[j].key })
	var b bytes.Buffer
	for i, st := range stanzas {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(st.text)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b.Bytes())
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return b.Bytes(), z.Bytes(), nil
}

// indexEntry is a package's paragraph in Packages: its control fields as
// dpkg-deb reads them, then where it is and its size and hashes.
func indexEntry(path, rel string) (stanza, error) {
	out, err := exec.Command("dpkg-deb", "--field", path).Output()
	if err != nil {
		return stanza{}, fmt.Errorf("dpkg-deb --field %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return stanza{}, err
	}
	m, s := md5.Sum(data), sha256.Sum256(data)
	text := strings.TrimRight(string(out), "\n") + fmt.Sprintf("\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s\n", rel, len(data), hex.EncodeToString(m[:]), hex.EncodeToString(s[:]))
	return stanza{key: filepath.Base(rel), text: text}, nil
}
