package lab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/lab/image"
)

const (
	hostKeyPath = "/etc/ssh/ssh_host_ed25519_key"
	wantsDir    = "/etc/systemd/system/multi-user.target.wants"
)

// enabledAtFirstBoot are the units a fresh node starts, as the Debian
// packages leave them: sshd, the container runtime, and the kubelet (the
// kubelet .deb enables it; it crash-loops until kubeadm writes its config).
// keepalived is installed but left for the provisioner to enable. A
// packaged lab's node has no kubelet until its package enables it.
var enabledAtFirstBoot = []string{"ssh.service", "containerd.service", "kubelet.service"}

func firstBootUnits(packaged bool) []string {
	if !packaged {
		return enabledAtFirstBoot
	}
	return slices.DeleteFunc(slices.Clone(enabledAtFirstBoot), func(u string) bool { return u == "kubelet.service" })
}

// nodeFile is one file to place on a node's disk, at its path on the node.
type nodeFile struct {
	Path    string
	Mode    os.FileMode
	Content []byte
	// Link, when set, makes a symlink to it instead.
	Link string
}

// layerOf maps a node path to the overlaid directory holding it and the
// path inside that directory. The machine's top-level symlinks are
// followed (/lib is usr/lib on Debian) so the file lands where the node
// reads it.
func layerOf(p string) (layer, rel string, err error) {
	p = filepath.Clean(p)
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)
	if len(parts) < 2 || !filepath.IsAbs(p) {
		return "", "", fmt.Errorf("node path %q is not a file under an overlaid directory", p)
	}
	top, rest := parts[0], parts[1]
	if target, err := os.Readlink("/" + top); err == nil && !filepath.IsAbs(target) {
		sub := strings.SplitN(filepath.Clean(target), "/", 2)
		top = sub[0]
		if len(sub) == 2 {
			rest = filepath.Join(sub[1], rest)
		}
	}
	for _, d := range overlaid {
		if d == top {
			return d, rest, nil
		}
	}
	return "", "", fmt.Errorf("node path %q is not under %v: nodes keep nothing else across boots", p, overlaid)
}

// diskPath is where a node path lives in the node's upper layers.
func (l *Lab) diskPath(node, p string) (string, error) {
	layer, rel, err := layerOf(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.upperDir(node, layer), rel), nil
}

// writeNodeFile writes into a node's upper layer while the node is off.
// Parents get the machine's modes for the same path, since an upper
// directory's attributes win over the lower one's in the merged view.
func (l *Lab) writeNodeFile(node string, f nodeFile) error {
	dst, err := l.diskPath(node, f.Path)
	if err != nil {
		return err
	}
	if err := l.mkdirNode(node, filepath.Dir(f.Path)); err != nil {
		return err
	}
	// A whiteout (the node deleted the file) is a character device: remove
	// it rather than write into it.
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if f.Link != "" {
		return os.Symlink(f.Link, dst)
	}
	mode := f.Mode
	if mode == 0 {
		mode = 0o644
	}
	if err := os.WriteFile(dst, f.Content, mode); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// mkdirNode creates a node directory in the upper layer, with the mode and
// owner the machine's directory of that path has.
func (l *Lab) mkdirNode(node, dir string) error {
	layer, rel, err := layerOf(filepath.Join(dir, "x"))
	if err != nil {
		return err
	}
	rel = filepath.Dir(rel)
	upper := l.upperDir(node, layer)
	if rel == "." {
		return nil
	}
	cur := upper
	host := "/" + layer
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		host = filepath.Join(host, part)
		if _, err := os.Lstat(cur); err == nil {
			continue
		}
		mode := os.FileMode(0o755)
		uid, gid := 0, 0
		if st, err := os.Stat(host); err == nil {
			mode = st.Mode().Perm()
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(sys.Uid), int(sys.Gid)
			}
		}
		if err := os.Mkdir(cur, mode); err != nil {
			return err
		}
		if err := os.Chmod(cur, mode); err != nil {
			return err
		}
		if err := os.Lchown(cur, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// diskExists reports whether a node has a disk from an earlier boot.
func (l *Lab) diskExists(node string) bool {
	_, err := os.Stat(filepath.Join(l.diskDir(node), ".installed"))
	return err == nil
}

// newDisk installs a node from scratch: empty layers over the machine's
// directories, the image's files, a fresh host key, the lab's client key
// trusted for root, and the first-boot units enabled. A packaged lab's
// node (inventory cluster.packages.manage) is as fresh as a real one
// before its Kubernetes packages: none of their files, none of them in
// its dpkg database. A real node (system SystemSystemd) gets the files and
// units a Debian machine set up for Kubernetes has over the rootfs, and
// the lab's distribution repository at gateway as its apt source. It
// returns the host public key.
func (l *Lab) newDisk(node, clientKey string, packaged bool, system, iface, gateway string) (string, error) {
	if err := os.RemoveAll(l.diskDir(node)); err != nil {
		return "", err
	}
	for _, d := range overlaid {
		mode := os.FileMode(0o755)
		if st, err := os.Stat("/" + d); err == nil {
			mode = st.Mode().Perm()
		}
		if d == "root" {
			mode = 0o700
		}
		for _, sub := range []string{l.upperDir(node, d), l.workDir(node, d)} {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return "", err
			}
		}
		// The upper directory's mode is the merged directory's mode.
		if err := os.Chmod(l.upperDir(node, d), mode); err != nil {
			return "", err
		}
	}
	priv, pub, err := newKey("root@" + node)
	if err != nil {
		return "", err
	}
	files := []nodeFile{
		{Path: hostKeyPath, Mode: 0o600, Content: priv},
		{Path: hostKeyPath + ".pub", Mode: 0o644, Content: []byte(pub + "\n")},
		{Path: "/root/.ssh/authorized_keys", Mode: 0o600, Content: []byte(clientKey + "\n")},
		{Path: "/etc/machine-id", Mode: 0o444, Content: []byte(randomHex(16) + "\n")},
	}
	nodeFiles := image.Files()
	if system == SystemSystemd {
		nodeFiles = image.RealFiles()
		files = append(files, installerNetplan(iface))
		apt, err := l.distributionFiles(gateway)
		if err != nil {
			return "", err
		}
		files = append(files, apt...)
	}
	for _, f := range nodeFiles {
		if packaged && slices.Contains(aptrepo.PackagedImageFiles, f.Path) {
			continue
		}
		files = append(files, nodeFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	if packaged && system != SystemSystemd {
		// A real node's dpkg database is the rootfs's own, which has
		// none of the packages.
		f, err := freshDpkg()
		if err != nil {
			return "", err
		}
		files = append(files, f)
	}
	for _, f := range files {
		if err := l.writeNodeFile(node, f); err != nil {
			return "", fmt.Errorf("installing %s on %s: %w", f.Path, node, err)
		}
	}
	if err := os.Chmod(filepath.Join(l.upperDir(node, "root"), ".ssh"), 0o700); err != nil {
		return "", err
	}
	if system == SystemSystemd {
		// Debian's packages enabled ssh and containerd in the rootfs;
		// the kubelet's package enables its unit when it installs it.
		if !packaged {
			if err := l.linkUnits(node, map[string]string{
				"kubelet.service": "/usr/lib/systemd/system/kubelet.service",
			}); err != nil {
				return "", err
			}
		}
	} else if err := l.enableUnits(node, firstBootUnits(packaged)); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(l.diskDir(node), ".installed"), nil, 0o644); err != nil {
		return "", err
	}
	return pub, nil
}

// enableUnits links units into multi-user.target.wants as `systemctl
// enable` would. The directory is made opaque first: the node's init starts
// everything linked there, and the machine's own links (postgresql,
// keepalived...) must not show through from the lower layer.
func (l *Lab) enableUnits(node string, units []string) error {
	if err := l.mkdirNode(node, wantsDir); err != nil {
		return err
	}
	dir, err := l.diskPath(node, wantsDir)
	if err != nil {
		return err
	}
	if err := unix.Setxattr(dir, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		return fmt.Errorf("making %s opaque: %w", dir, err)
	}
	for _, u := range units {
		if err := l.writeNodeFile(node, nodeFile{Path: wantsDir + "/" + u, Link: unitPath(u)}); err != nil {
			return err
		}
	}
	return nil
}

// linkUnits enables units on a real node as `systemctl enable` does, beside
// what its packages enabled.
func (l *Lab) linkUnits(node string, units map[string]string) error {
	for _, u := range slices.Sorted(maps.Keys(units)) {
		if err := l.writeNodeFile(node, nodeFile{Path: wantsDir + "/" + u, Link: units[u]}); err != nil {
			return err
		}
	}
	return nil
}

// unitPath is where a unit's file is on a node: the image's copy, else the
// Debian package's.
func unitPath(unit string) string {
	for _, f := range image.Files() {
		if filepath.Base(f.Path) == unit && !strings.HasSuffix(filepath.Dir(f.Path), ".d") {
			return f.Path
		}
	}
	return "/lib/systemd/system/" + unit
}

// readHostKey returns the public host key on a kept disk.
func (l *Lab) readHostKey(node string) (string, error) {
	p, err := l.diskPath(node, hostKeyPath+".pub")
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("kept disk of %s has no host key: %w", node, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// writeBootFiles writes what the lab's hardware and network decide, before
// every boot: the hostname, its address in /etc/hosts, a resolver that
// reaches nothing off the lab, and sshd bound to the node's address.
func (l *Lab) writeBootFiles(s *State, n *NodeState) error {
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n%s\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n", n.Address, n.Name)
	sshd := fmt.Sprintf(`# Written by homelab-lab before every boot: the lab's hardware, not cluster
# configuration. sshd in a namespace has no PAM session and shares no /run.
Port %d
ListenAddress %s
HostKey %s
UsePAM no
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
`, s.SSHPort, n.Address, hostKeyPath)
	files := []nodeFile{
		{Path: "/etc/hostname", Content: []byte(n.Name + "\n")},
		{Path: "/etc/hosts", Content: []byte(hosts)},
		{Path: "/etc/resolv.conf", Content: []byte(resolvConf(s))},
		{Path: "/etc/ssh/sshd_config.d/50-homelab-lab.conf", Content: []byte(sshd)},
	}
	if n.System == SystemSystemd {
		// The registry's address is the lab's network, like the resolver.
		mirrors, err := mirrorFiles(s)
		if err != nil {
			return err
		}
		files = append(files, mirrors...)
	}
	for _, f := range files {
		if err := l.writeNodeFile(n.Name, f); err != nil {
			return fmt.Errorf("%s on %s: %w", f.Path, n.Name, err)
		}
	}
	return nil
}

// installerNetplan is the network configuration a real node's disk comes
// with, as Ubuntu's installer and cloud images leave it: DHCP on the NIC,
// in cloud-init's file. The lab's DHCP server (dhcp.go) leases the node
// its declared address until homelab up makes the address static.
func installerNetplan(iface string) nodeFile {
	return nodeFile{Path: "/etc/netplan/50-cloud-init.yaml", Mode: 0o600, Content: []byte(fmt.Sprintf(`# This file is generated from information provided by the datasource. Changes
# to it will not persist across an instance reboot. (As cloud-init writes
# it; here the lab's installer.)
network:
  version: 2
  ethernets:
    %s:
      dhcp4: true
`, iface))}
}

func resolvConf(s *State) string {
	// The gateway answers nothing on port 53 and routes nothing: lookups
	// fail fast and never leave the lab.
	return "# homelab-lab: no resolver is reachable from the lab\nnameserver " + s.Gateway + "\n"
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// randomMAC returns a locally administered unicast MAC, as a replacement
// board would bring.
// AddressMAC is the MAC the lab gives a node whose inventory entry has
// none: QEMU's prefix (libvirt's default) and the address's last three
// bytes, so a node keeps one MAC from lab to lab, as a machine keeps its
// NIC's, and inventory/lab.yaml can leave it out (real nodes must:
// docs/lab.md). A replaced node gets a random one (randomMAC).
func AddressMAC(address string) string {
	ip := net.ParseIP(address).To4()
	if ip == nil {
		return randomMAC()
	}
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", ip[1], ip[2], ip[3])
}

func randomMAC() string {
	b := make([]byte, 6)
	rand.Read(b)
	b[0] = (b[0] | 0x02) &^ 0x01
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}
