// Package aptrepo is the emulated homelab's apt repository: .deb packages
// of kubeadm, kubelet and kubectl built with dpkg-deb from the cached
// binaries of each Kubernetes version (the kubelet's being the lab's
// stand-in), written as pkgs.k8s.io lays out a minor's repository (a flat
// repository: Packages, Release, InRelease and Release.gpg signed with the
// lab's own key) and served over HTTP at pkgs.k8s.io's paths, so a lab
// node installs them through the real apt and dpkg.
package aptrepo

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Spec is one binary package.
type Spec struct {
	Name    string
	Version string // Debian version, 1.34.4-1.1
	Section string
	Depends string
	// Provides, Conflicts and Replaces: a package taking another's place
	// (Docker's containerd.io takes containerd's and runc's).
	Provides, Conflicts, Replaces string
	Description                   string
	Files                         []File
	// Postinst is the maintainer script dpkg runs after unpacking.
	Postinst string
}

// File is one file the package installs. Src is a file on this machine,
// linked into the package's tree (a cached binary); else Content.
type File struct {
	Path    string
	Mode    os.FileMode
	Src     string
	Content []byte
	// Conffile: dpkg keeps the admin's edits across upgrades.
	Conffile bool
}

// Filename is the package's file name as Debian names them.
func (s Spec) Filename(arch string) string {
	return s.Name + "_" + s.Version + "_" + arch + ".deb"
}

// Maintainer of every package the lab builds: not the Kubernetes Authors,
// whose packages these only imitate.
const maintainer = "homelab emulated homelab <lab@homelab.invalid>"

func (s Spec) control(arch string, installedKiB int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: %s\nInstalled-Size: %d\n", s.Name, s.Version, arch, maintainer, installedKiB)
	for _, f := range []struct{ name, value string }{{"Depends", s.Depends}, {"Provides", s.Provides}, {"Conflicts", s.Conflicts}, {"Replaces", s.Replaces}} {
		if f.value != "" {
			fmt.Fprintf(&b, "%s: %s\n", f.name, f.value)
		}
	}
	fmt.Fprintf(&b, "Section: %s\nPriority: optional\nHomepage: https://kubernetes.io\nDescription: %s\n", s.Section, s.Description)
	return b.String()
}

// fingerprint identifies what a build of the package is made of: the
// control data and every file's path, mode and content (a source file by
// size and modification time, as a rebuilt binary always changes one).
func (s Spec) fingerprint(arch string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\npostinst %q\n", s.control(arch, 0), s.Postinst)
	for _, f := range s.Files {
		fmt.Fprintf(h, "%s %o %t\n", f.Path, f.Mode, f.Conffile)
		if f.Src != "" {
			st, err := os.Stat(f.Src)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "src %s %d %d\n", f.Src, st.Size(), st.ModTime().UnixNano())
		} else {
			sum := sha256.Sum256(f.Content)
			fmt.Fprintf(h, "content %x\n", sum)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Build returns the package's .deb in dir, built with dpkg-deb unless a
// build of the same inputs is there already (dir is a cache kept outside
// the lab, keyed by version).
func Build(dir, arch string, s Spec) (string, error) {
	out := filepath.Join(dir, s.Filename(arch))
	fp, err := s.fingerprint(arch)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	stamp := out + ".inputs"
	if old, err := os.ReadFile(stamp); err == nil && string(old) == fp {
		if _, err := os.Stat(out); err == nil {
			return out, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tree, err := os.MkdirTemp(dir, ".build-"+s.Name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tree)
	if err := s.stage(tree, arch); err != nil {
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	tmp := out + ".tmp"
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-z6", "--build", tree, tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("dpkg-deb --build %s: %w\n%s", s.Name, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, os.WriteFile(stamp, []byte(fp), 0o644)
}

// stage lays the package's tree out in dir: its files, DEBIAN/control,
// conffiles and md5sums (what dpkg --verify checks).
func (s Spec) stage(dir, arch string) error {
	var size int64
	var sums, conffiles strings.Builder
	files := append([]File(nil), s.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if !filepath.IsAbs(f.Path) {
			return fmt.Errorf("%s is not an absolute path", f.Path)
		}
		dst := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if f.Src != "" {
			if err := linkOrCopy(f.Src, dst, f.Mode); err != nil {
				return err
			}
		} else if err := os.WriteFile(dst, f.Content, f.Mode); err != nil {
			return err
		}
		// WriteFile's mode is masked by the umask; the package's is not.
		if err := os.Chmod(dst, f.Mode); err != nil {
			return err
		}
		sum, n, err := md5File(dst)
		if err != nil {
			return err
		}
		size += n
		fmt.Fprintf(&sums, "%s  %s\n", sum, strings.TrimPrefix(f.Path, "/"))
		if f.Conffile {
			conffiles.WriteString(f.Path + "\n")
		}
	}
	meta := filepath.Join(dir, "DEBIAN")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		return err
	}
	if s.Postinst != "" {
		if err := os.WriteFile(filepath.Join(meta, "postinst"), []byte(s.Postinst), 0o755); err != nil {
			return err
		}
	}
	kib := (size + 1023) / 1024
	for name, content := range map[string]string{"control": s.control(arch, kib), "md5sums": sums.String(), "conffiles": conffiles.String()} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(meta, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func md5File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := md5.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// linkOrCopy hard-links src (a cached binary: instant, no space) when its
// mode is the one wanted, else copies it.
func linkOrCopy(src, dst string, mode os.FileMode) error {
	if st, err := os.Stat(src); err == nil && st.Mode().Perm() == mode.Perm() {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Arch is this machine's Debian architecture, which the cached binaries
// and the stand-ins are built for.
func Arch() (string, error) {
	out, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		return "", fmt.Errorf("dpkg --print-architecture: %w", err)
	}
	a := string(bytes.TrimSpace(out))
	if a == "" {
		return "", errors.New("dpkg --print-architecture printed nothing")
	}
	return a, nil
}
