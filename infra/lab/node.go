package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// bootTimeout bounds how long a node may take from start to sshd answering.
const bootTimeout = 30 * time.Second

// spec describes a node's boot: its layers over the machine's directories,
// or, for a real node, over the installed rootfs.
func (l *Lab) spec(s *State, n *NodeState) bootSpec {
	sp := bootSpec{Node: n.Name, Hostname: n.Name, Hide: []string{l.Dir}, Init: nodeInit}
	real := n.System == SystemSystemd
	for _, d := range overlaid {
		lower := []string{"/" + d}
		switch {
		case real && d == "usr":
			lower = []string{filepath.Join(s.SystemdTools, "usr"), filepath.Join(s.Rootfs, d)}
		case real:
			lower = []string{filepath.Join(s.Rootfs, d)}
		case d == "usr":
			lower = []string{filepath.Join(s.Tools, "usr"), "/usr"}
		case d == "root":
			// A fresh install's /root, not the machine's (its keys and caches).
			lower = []string{filepath.Join(l.baseDir(), "root")}
		}
		sp.Overlays = append(sp.Overlays, overlay{Target: "/" + d, Lower: lower, Upper: l.upperDir(n.Name, d), Work: l.workDir(n.Name, d)})
	}
	if real {
		sp.Systemd, sp.Init, sp.Hide = true, systemdInit, nil
		sp.Root, sp.Rootfs = l.rootMount(n.Name), s.Rootfs
		for _, d := range plainDirs {
			sp.Plain = append(sp.Plain, bind{Source: l.plainDir(n.Name, d), Target: d})
		}
	}
	return sp
}

func (l *Lab) ensureBase() error {
	root := filepath.Join(l.baseDir(), "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	for _, f := range []string{".bashrc", ".profile"} {
		if data, err := os.ReadFile("/etc/skel/" + f); err == nil {
			if err := os.WriteFile(filepath.Join(root, f), data, 0o644); err != nil {
				return err
			}
		}
	}
	return os.Chmod(root, 0o700)
}

// start boots a powered-off node whose namespace and link are in place: the
// lab re-executes its own binary under nsenter and unshare, which Boot then
// turns into the node. It returns once the node's PID 1 is known.
func (l *Lab) start(s *State, n *NodeState) error {
	if err := l.writeBootFiles(s, n); err != nil {
		return err
	}
	sp := l.spec(s, n)
	if sp.Systemd {
		hs, err := hostHierarchies(s.Names().Node(n.Name))
		if err != nil {
			return err
		}
		n.Cgroups = nil
		for _, h := range hs {
			n.Cgroups = append(n.Cgroups, h.Host)
		}
		if err := l.saveState(s); err != nil {
			return err
		}
		if err := makeCgroups(hs); err != nil {
			return err
		}
		sp.Cgroups = hs
	}
	data, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	specPath := l.bootSpecPath(n.Name)
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	console, err := os.OpenFile(l.consolePath(n.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer console.Close()
	fmt.Fprintf(console, "\n--- homelab-lab: boot %d of %s at %s\n", n.Boots+1, n.Name, time.Now().Format(time.RFC3339))
	// nsenter rather than `ip netns exec`, which remounts /sys and loses the
	// cgroup mounts kubeadm's preflight reads. unshare --fork ignores
	// SIGTERM; --kill-child ends the whole node when it is SIGKILLed.
	unshare := []string{"unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc"}
	if sp.Systemd {
		// Its own IPC too, as a machine has; the boot mounts its own /proc
		// once it has its own root.
		unshare = []string{"unshare", "--mount", "--uts", "--ipc", "--pid", "--fork", "--kill-child", "--propagation", "private"}
	}
	cmd := exec.Command("nsenter", append(append([]string{"--net=" + filepath.Join(netnsDir, n.Netns), "--"}, unshare...),
		exe, "boot", specPath)...)
	cmd.Env = []string{envBoot + "=" + specPath, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout = console
	cmd.Stderr = console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", n.Name, err)
	}
	// Reap it when it dies while this process lives (a test); a CLI exits
	// first and the node is reparented.
	go cmd.Wait()
	p, err := procOf(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("%s died at once; see %s", n.Name, l.consolePath(n.Name))
	}
	n.Unshare, n.Init, n.PIDNS = p, nil, 0
	n.Power = powerOn
	n.Boots++
	n.Mounts = nil
	for _, o := range sp.Overlays {
		n.Mounts = append(n.Mounts, "overlay "+o.Target)
	}
	if sp.Systemd {
		n.Mounts = append([]string{"tmpfs /"}, n.Mounts...)
		for _, b := range sp.Plain {
			n.Mounts = append(n.Mounts, "bind "+b.Target)
		}
		n.Mounts = append(n.Mounts, "tmpfs /run", "tmpfs /tmp", "proc /proc", "ro /proc/sys", "rw /proc/sys/net", "sysfs /sys", "cgroups /sys/fs/cgroup", "tmpfs /dev", "devpts /dev/pts", "tmpfs /dev/shm")
	} else {
		n.Mounts = append(n.Mounts, "tmpfs /run", "tmpfs /tmp", "tmpfs /dev/shm", "sysfs /sys", "devpts /dev/pts", "ro /proc/sys", "rw /proc/sys/net", "tmpfs "+l.Dir)
	}
	if err := l.saveState(s); err != nil {
		return err
	}
	if err := l.findInit(n); err != nil {
		return err
	}
	return l.saveState(s)
}

// findInit records the node's PID 1: unshare's child, once it is in a PID
// namespace of its own.
func (l *Lab) findInit(n *NodeState) error {
	self, _ := nsInode(os.Getpid(), "pid")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if !n.Unshare.Alive() {
			return fmt.Errorf("%s stopped while booting:\n%s", n.Name, l.consoleTail(n.Name))
		}
		if c := childOf(n.Unshare.PID); c > 0 {
			if ino, err := nsInode(c, "pid"); err == nil && ino != self {
				p, err := procOf(c)
				if err == nil {
					n.Init, n.PIDNS = p, ino
					return nil
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("%s: no PID 1 appeared under unshare (pid %d)", n.Name, n.Unshare.PID)
}

// waitSSH waits until the node's sshd accepts the lab's key and shows the
// host key known_hosts lists: the node is then reachable as the
// provisioner will reach it.
func (l *Lab) waitSSH(ctx context.Context, s *State, n *NodeState) error {
	ctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := l.sshClient(actx, s, n)
		acancel()
		if err == nil {
			c.Close()
			return nil
		}
		if !n.Unshare.Alive() {
			return fmt.Errorf("%s stopped while booting:\n%s", n.Name, l.consoleTail(n.Name))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no SSH login after %s: %v\n%s", n.Name, bootTimeout, err, l.consoleTail(n.Name))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *Lab) consoleTail(name string) string {
	data, _ := os.ReadFile(l.consolePath(name))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "  console (" + l.consolePath(name) + "):\n    " + strings.Join(lines, "\n    ")
}

// stop is the power cord: every process of the node dies at once (SIGKILL
// to unshare, whose --kill-child takes PID 1 and with it the PID
// namespace), then the node's link and namespace go, and with them any
// address it held (a VIP vanishes, as it does from a machine without power).
func (l *Lab) stop(s *State, n *NodeState) error {
	for _, p := range []*Proc{n.Unshare, n.Init} {
		if err := p.Kill(); err != nil {
			return fmt.Errorf("killing %s (pid %d): %w", n.Name, p.PID, err)
		}
	}
	err := waitGone(10*time.Second, func() int {
		left := len(pidsInNS(n.PIDNS))
		if n.Unshare.Alive() {
			left++
		}
		return left
	})
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	if err := removeCgroups(n.Cgroups); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	n.Unshare, n.Init, n.PIDNS, n.Mounts, n.Cgroups = nil, nil, 0, nil, nil
	n.Power, n.Cut = powerOff, false
	if err := l.saveState(s); err != nil {
		return err
	}
	return l.unplugNode(s, n)
}

// powerOn plugs the node in and boots it from its disk.
func (l *Lab) powerOn(ctx context.Context, s *State, n *NodeState) error {
	if err := l.plugNode(s, n); err != nil {
		return err
	}
	if err := l.start(s, n); err != nil {
		return err
	}
	return l.waitSSH(ctx, s, n)
}

// PowerOff unplugs a node: see stop.
func (l *Lab) PowerOff(name string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		if n.Power == powerOff {
			l.logf("lab: %s is already off", name)
			return nil
		}
		return l.stop(s, n)
	})
}

// PowerOn boots a powered-off node with its disk as it was.
func (l *Lab) PowerOn(ctx context.Context, name string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		if n.Power == powerOn {
			l.logf("lab: %s is already on", name)
			return nil
		}
		return l.powerOn(ctx, s, n)
	})
}

// Replace swaps a node's hardware: a blank disk (new host key, nothing of
// the cluster), a new MAC, same name and address. The lab's own record
// learns the new key; the provisioner's known_hosts keeps the old one, so
// SSH refuses the node until its key is accepted (`homelab hosts accept`).
func (l *Lab) Replace(ctx context.Context, name string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		if n.Power == powerOn {
			if err := l.stop(s, n); err != nil {
				return err
			}
		}
		clientKey, err := l.ensureClientKey()
		if err != nil {
			return err
		}
		pub, err := l.newDisk(n.Name, clientKey, s.Packages, n.System, n.Interface, s.Gateway)
		if err != nil {
			return err
		}
		n.HostKey = pub
		n.MAC = randomMAC()
		if err := l.saveState(s); err != nil {
			return err
		}
		if err := l.followDHCP(s); err != nil {
			return err
		}
		if err := l.writeLabKnownHosts(s); err != nil {
			return err
		}
		return l.powerOn(ctx, s, n)
	})
}

// Readdress brings a node back on another address (a DHCP lease changed):
// the lab's wiring and sshd follow, the cluster's configuration does not.
func (l *Lab) Readdress(ctx context.Context, name, address string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		a := net.ParseIP(address)
		_, cidr, err := net.ParseCIDR(s.CIDR)
		if err != nil {
			return err
		}
		if a == nil || a.To4() == nil || !cidr.Contains(a) {
			return fmt.Errorf("%s is not an IPv4 address in the lab subnet %s", address, s.CIDR)
		}
		a = a.To4()
		broadcast := make(net.IP, 4)
		for i := range broadcast {
			broadcast[i] = cidr.IP.To4()[i] | ^cidr.Mask[i]
		}
		if a.Equal(cidr.IP) || a.Equal(broadcast) || address == s.Gateway || address == s.VIP {
			return fmt.Errorf("%s is the subnet, broadcast, gateway or VIP address", address)
		}
		for _, o := range s.Nodes {
			if o != n && o.Address == address {
				return fmt.Errorf("%s already has %s", o.Name, address)
			}
		}
		if n.Power == powerOn {
			if err := l.stop(s, n); err != nil {
				return err
			}
		}
		if n.System == SystemSystemd {
			if err := l.readdressNetplan(n.Name, n.Address, address); err != nil {
				return err
			}
		}
		n.Address = address
		if err := l.saveState(s); err != nil {
			return err
		}
		if err := l.writeLabKnownHosts(s); err != nil {
			return err
		}
		if err := l.followAddress(s, n); err != nil {
			return err
		}
		if err := l.followDHCP(s); err != nil {
			return err
		}
		return l.powerOn(ctx, s, n)
	})
}

// readdressNetplan moves a real node's static address, while it is off,
// in every netplan file its disk holds: once homelab up has made the
// address static (roles/netplan), a changed DHCP reservation no longer
// moves the node, and what moves it is someone re-addressing the machine
// (a reinstall, an edited netplan), as this does. A node still on DHCP
// has no such file and follows its new reservation.
func (l *Lab) readdressNetplan(node, from, to string) error {
	dir, err := l.diskPath(node, "/etc/netplan")
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The address with its prefix length, as netplan lists it.
		moved := strings.ReplaceAll(string(data), from+"/", to+"/")
		if moved == string(data) {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(moved), fi.Mode().Perm()); err != nil {
			return err
		}
		l.logf("lab: %s's %s now gives it %s", node, filepath.Join("/etc/netplan", e.Name()), to)
	}
	return nil
}

// withNode runs a change to one node under the lab lock.
func (l *Lab) withNode(name string, fn func(*State, *NodeState) error) error {
	if err := requireRoot(); err != nil {
		return err
	}
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	s, err := l.LoadState()
	if err != nil {
		return err
	}
	n, err := s.Node(name)
	if err != nil {
		return err
	}
	return fn(s, n)
}

func requireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the lab needs root: it creates network namespaces, mounts and veths (run it with sudo)")
	}
	return nil
}
