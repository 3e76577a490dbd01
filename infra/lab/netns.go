package lab

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

const netnsDir = "/run/netns"

// run executes a command and folds its output into the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func ip(args ...string) error { return run("ip", args...) }

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

// isMountPoint reports whether path is a mount point in this mount namespace.
func isMountPoint(path string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == path {
			return true
		}
	}
	return false
}

// addNetns creates a named network namespace and records it before anything
// is put in it, so down finds it even if the next step fails.
func (l *Lab) addNetns(s *State, name string) error {
	if netnsExists(name) {
		if !reclaimStale(name) {
			return fmt.Errorf("network namespace %s already exists but the lab did not record it; it may be left from another lab: inspect it with `ip netns list` and remove it with `ip netns del %s`", name, name)
		}
	}
	mounted := isMountPoint(netnsDir)
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	if err := recordOwner(name, l.Dir); err != nil {
		return err
	}
	if !mounted && isMountPoint(netnsDir) {
		s.NetnsDirMounted = true
	}
	s.addNetns(name)
	if err := l.saveState(s); err != nil {
		return err
	}
	return ip("-n", name, "link", "set", "lo", "up")
}

func delNetns(name string) error {
	if !netnsExists(name) {
		os.Remove(ownerPath(name))
		return nil
	}
	if err := ip("netns", "del", name); err != nil {
		return err
	}
	os.Remove(ownerPath(name))
	return nil
}

// ownersDir records, machine-wide, which lab directory made each namespace.
// It lives on /run like the namespaces, so a reboot clears both.
const ownersDir = "/run/homelab/netns"

func ownerPath(name string) string { return filepath.Join(ownersDir, name) }

func recordOwner(name, labDir string) error {
	abs, err := filepath.Abs(labDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(ownersDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(ownerPath(name), []byte(abs+"\n"), 0o644)
}

// reclaimStale removes a namespace that a lab made and can no longer take
// down: its directory's state (the only record down works from) is gone,
// typically a test's temporary directory after the test process was killed,
// and no process runs in it. A namespace without an owner record, or whose
// owner still lists it, is left alone: it may be another lab's.
func reclaimStale(name string) bool {
	data, err := os.ReadFile(ownerPath(name))
	if err != nil {
		return false
	}
	owner := strings.TrimSpace(string(data))
	st, err := (&Lab{Dir: owner}).LoadState()
	if err != nil && !IsNoLab(err) {
		return false
	}
	if st != nil {
		for _, n := range st.Netns {
			if n == name {
				return false
			}
		}
	}
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		return false
	}
	if err := delNetns(name); err != nil {
		return false
	}
	fmt.Fprintf(os.Stderr, "lab: removed network namespace %s, left by the lab in %s, which no longer records it\n", name, owner)
	return true
}

// releaseNetnsDir undoes iproute2's bind mount of /run/netns once the lab's
// last namespace is gone and nothing else uses the directory.
func releaseNetnsDir(s *State) error {
	if !s.NetnsDirMounted {
		return nil
	}
	if entries, err := os.ReadDir(netnsDir); err == nil && len(entries) > 0 {
		return nil
	}
	if isMountPoint(netnsDir) {
		if err := unix.Unmount(netnsDir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", netnsDir, err)
		}
	}
	s.NetnsDirMounted = false
	return nil
}

// inNetns runs fn on an OS thread that has joined the named network
// namespace. Sockets fn creates live there.
func inNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread now belongs to another network
		// namespace, and Go ends a locked thread when its goroutine returns
		// instead of handing it to other goroutines.
		runtime.LockOSThread()
		fd, err := unix.Open(filepath.Join(netnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("lab network namespace %s: %w (is the lab up?)", name, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// setNetSysctls writes net.* sysctls of a namespace (they are per
// namespace: /proc/sys/net shows the reading thread's namespace).
func setNetSysctls(netns string, kv map[string]string) error {
	return inNetns(netns, func() error {
		for k, v := range kv {
			p := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", k, v, netns, err)
			}
		}
		return nil
	})
}

// linkName derives a bridge-side veth name (at most 15 bytes) from a node
// name of any length.
func linkName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "hl" + hex.EncodeToString(sum[:])[:10]
}

// noForward makes a namespace refuse to route: new namespaces inherit the
// machine's IPv4 forwarding setting, and the lab must route nothing.
var noForward = map[string]string{
	"net.ipv4.ip_forward":                  "0",
	"net.ipv6.conf.all.forwarding":         "0",
	"net.ipv4.conf.all.send_redirects":     "0",
	"net.ipv4.conf.default.send_redirects": "0",
}

// upNetwork makes the bridge namespace and the gateway namespace.
func (l *Lab) upNetwork(s *State, gwPrefix string) error {
	br, gw := s.Names().Bridge(), s.Names().Gateway()
	if err := l.addNetns(s, br); err != nil {
		return err
	}
	if err := setNetSysctls(br, noForward); err != nil {
		return err
	}
	if err := ip("-n", br, "link", "add", bridgeName, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("-n", br, "link", "set", bridgeName, "up"); err != nil {
		return err
	}
	if err := l.addNetns(s, gw); err != nil {
		return err
	}
	if err := setNetSysctls(gw, noForward); err != nil {
		return err
	}
	k := Link{Name: "hlgw", Netns: gw, Peer: "eth0"}
	if err := ip("-n", br, "link", "add", k.Name, "type", "veth", "peer", "name", k.Peer, "netns", k.Netns); err != nil {
		return err
	}
	s.addLink(k)
	if err := l.saveState(s); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-n", br, "link", "set", k.Name, "master", bridgeName, "up"},
		{"-n", gw, "addr", "add", gwPrefix, "dev", k.Peer},
		{"-n", gw, "link", "set", k.Peer, "up"},
		// Its own address is reached over loopback, down in a new
		// namespace: the apt repository's server is checked from here.
		{"-n", gw, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// plugNode gives a node its namespace and its cable into the bridge, with
// its MAC and forwarding on (kubeadm's preflight wants it); a stand-in
// node's also configured as its network config would: address and default
// route via the gateway.
func (l *Lab) plugNode(s *State, n *NodeState) error {
	br := s.Names().Bridge()
	if err := l.addNetns(s, n.Netns); err != nil {
		return err
	}
	// A gratuitous ARP when the link comes up, as a booting machine's
	// network stack sends: after a replace (new MAC) or readdress the
	// gateway and peers would otherwise keep a stale entry for seconds.
	if err := setNetSysctls(n.Netns, map[string]string{"net.ipv4.conf.all.arp_notify": "1", "net.ipv4.conf.default.arp_notify": "1"}); err != nil {
		return err
	}
	k := Link{Name: linkName(n.Name), Netns: n.Netns, Peer: n.Interface}
	if err := ip("-n", br, "link", "add", k.Name, "type", "veth", "peer", "name", k.Peer, "address", n.MAC, "netns", k.Netns); err != nil {
		return err
	}
	n.Link = k.Name
	s.addLink(k)
	if err := l.saveState(s); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", br, "link", "set", k.Name, "master", bridgeName, "up"},
		{"-n", n.Netns, "addr", "add", fmt.Sprintf("%s/%d", n.Address, n.Prefix), "dev", n.Interface},
		{"-n", n.Netns, "link", "set", n.Interface, "up"},
		{"-n", n.Netns, "route", "add", "default", "via", s.Gateway},
	}
	sysctls := map[string]string{"net.ipv4.ip_forward": "1"}
	if n.System == SystemSystemd {
		// A real node's networkd configures its NIC from its disk (at
		// first, a lease from the lab's DHCP server: dhcp.go). sshd binds
		// the node's address (the lab's sshd_config), which arrives only
		// then.
		steps = [][]string{steps[0]}
		sysctls["net.ipv4.ip_nonlocal_bind"] = "1"
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return setNetSysctls(n.Netns, sysctls)
}

// unplugNode removes a node's cable and namespace: deleting the veth takes
// both ends (and any VIP on the node's end) at once, not when the
// namespace's last user goes.
func (l *Lab) unplugNode(s *State, n *NodeState) error {
	br, gw := s.Names().Bridge(), s.Names().Gateway()
	// Only what this lab recorded: after an up that failed because another
	// lab holds the names, removing by name would cut that lab's nodes.
	if n.Link != "" && s.hasLink(n.Link) && s.hasNetns(br) && netnsExists(br) {
		if err := ip("-n", br, "link", "del", n.Link); err != nil && linkExists(br, n.Link) {
			return err
		}
	}
	s.removeLink(n.Link)
	if !s.hasNetns(n.Netns) {
		return l.saveState(s)
	}
	if s.hasNetns(gw) && netnsExists(gw) {
		// The gateway forgets the unplugged MAC at once.
		ip("-n", gw, "neigh", "flush", "to", n.Address)
	}
	if err := delNetns(n.Netns); err != nil {
		return err
	}
	s.removeNetns(n.Netns)
	return l.saveState(s)
}

func linkExists(netns, name string) bool {
	return ip("-n", netns, "link", "show", name) == nil
}
