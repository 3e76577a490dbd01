package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/ciliumchart"
	"github.com/homelab-dev/homelab/inventory"
)

// hostPrograms are what the lab needs from the machine.
var hostPrograms = []string{"ip", "nsenter", "unshare", "/usr/sbin/sshd", "/usr/sbin/keepalived"}

// Up makes one node per inventory node and boots them all. On a lab that is
// already up it changes nothing and returns the state. A failed up leaves
// its state, so Down removes what was made.
func (l *Lab) Up(ctx context.Context, inventoryPath string) (s *State, already bool, err error) {
	if err := requireRoot(); err != nil {
		return nil, false, err
	}
	inv, warnings, err := inventory.Load(inventoryPath)
	for _, w := range warnings {
		l.logf("inventory: %v", w)
	}
	if err != nil {
		return nil, false, fmt.Errorf("inventory %s: %w", inventoryPath, err)
	}
	if err := checkLabInventory(inv, l.Names()); err != nil {
		return nil, false, err
	}
	for _, p := range hostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			return nil, false, fmt.Errorf("the lab needs %s on this machine (apt-get install openssh-server keepalived iproute2 util-linux): %w", p, err)
		}
	}
	unlock, err := l.lock()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if old, err := l.LoadState(); err == nil {
		return old, true, nil
	} else if !IsNoLab(err) {
		return nil, false, err
	}
	l.warnSSHPaths(inv)
	start := time.Now()
	abs, _ := filepath.Abs(inventoryPath)
	s = newState(inv, abs, l.Names())
	for i, n := range s.Nodes {
		if slices.Contains(l.Systemd, n.Name) || slices.Contains(l.Systemd, "*") {
			n.System = SystemSystemd
			if inv.Nodes[i].MAC != "" {
				l.logf("lab: warning: %s is a real node and its inventory entry has a mac: netplan matches a NIC's permanent MAC, which a lab NIC (a veth) lacks, so homelab up's network configuration would find no NIC there and be rolled back; leave nodes[].mac out for real nodes (docs/lab.md)", n.Name)
			}
		}
	}
	if err := l.checkSystemd(s); err != nil {
		return nil, false, err
	}
	if err := l.saveState(s); err != nil {
		return nil, false, err
	}
	fail := func(err error) (*State, bool, error) {
		return s, false, fmt.Errorf("%w\n(the lab is partly up; `homelab-lab down` removes what was made)", err)
	}
	if err := l.build(s, inv); err != nil {
		return fail(err)
	}
	clientKey, err := l.ensureClientKey()
	if err != nil {
		return fail(err)
	}
	for _, n := range s.Nodes {
		if l.diskExists(n.Name) {
			n.HostKey, err = l.readHostKey(n.Name)
		} else {
			n.HostKey, err = l.newDisk(n.Name, clientKey, s.Packages, n.System, n.Interface, s.Gateway)
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := l.saveState(s); err != nil {
		return fail(err)
	}
	if err := l.writeLabKnownHosts(s); err != nil {
		return fail(err)
	}
	if err := l.recordInstalledHosts(s); err != nil {
		return fail(err)
	}
	_, subnet, _ := net.ParseCIDR(s.CIDR)
	ones, _ := subnet.Mask.Size()
	if err := l.upNetwork(s, fmt.Sprintf("%s/%d", s.Gateway, ones)); err != nil {
		return fail(err)
	}
	if s.Packages || s.HasSystemd() {
		if err := l.startAptServer(ctx, s, s.Names().GatewayPath()); err != nil {
			return fail(err)
		}
	}
	if s.HasSystemd() {
		if err := l.startRegistry(ctx, s, s.Names().GatewayPath()); err != nil {
			return fail(err)
		}
		if err := l.startS3(ctx, s); err != nil {
			return fail(err)
		}
		if err := l.startDHCP(s); err != nil {
			return fail(err)
		}
	}
	for _, n := range s.Nodes {
		if err := l.plugNode(s, n); err != nil {
			return fail(err)
		}
		if err := l.start(s, n); err != nil {
			return fail(err)
		}
	}
	if err := l.saveState(s); err != nil {
		return fail(err)
	}
	// Nodes boot in parallel; wait for every sshd.
	var wg sync.WaitGroup
	errs := make([]error, len(s.Nodes))
	for i, n := range s.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.waitSSH(ctx, s, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	l.logf("lab: %d nodes up in %s", len(s.Nodes), time.Since(start).Round(10*time.Millisecond))
	return s, false, nil
}

// build makes what the lab's nodes run: the binaries, the real nodes'
// root and images, the apt repository. The builds write the machine's
// tool cache (the node binary, images keyed by their inputs, packages),
// which every lab shares: two labs coming up at once build one after the
// other, and the second finds the first one's builds.
func (l *Lab) build(s *State, inv *inventory.Inventory) error {
	release, err := lockBuilds()
	if err != nil {
		return err
	}
	defer release()
	if err := l.ensureBase(); err != nil {
		return err
	}
	if _, err := ciliumchart.Write(filepath.Dir(l.ChartPath())); err != nil {
		return err
	}
	if s.Tools, err = l.buildTools(inv.Cluster.KubernetesVersion, s.Packages); err != nil {
		return err
	}
	if s.HasSystemd() {
		if s.Rootfs, s.SystemdTools, err = l.buildSystemd(inv.Cluster.KubernetesVersion, s.Packages); err != nil {
			return err
		}
		if err := l.buildRegistry(inv.Cluster.KubernetesVersion, s.Rootfs); err != nil {
			return err
		}
		if err := l.buildDistributionRepo(); err != nil {
			return err
		}
		if err := l.ensureInotify(s.realNodes() + realNodesElsewhere(l.Dir)); err != nil {
			return err
		}
	}
	if s.Packages {
		versions, err := l.buildAptRepo(s.HasSystemd())
		if err != nil {
			return err
		}
		if err := l.checkAptInventory(s, inv, versions); err != nil {
			return err
		}
	}
	return nil
}

func newState(inv *inventory.Inventory, invPath string, names Names) *State {
	_, subnet, _ := net.ParseCIDR(inv.Cluster.Network.NodeCIDR)
	ones, _ := subnet.Mask.Size()
	s := &State{
		Inventory:   invPath,
		Cluster:     inv.Cluster.Name,
		CIDR:        subnet.String(),
		Gateway:     inv.Cluster.Network.Gateway,
		SSHPort:     inv.SSH.Port,
		SSHUser:     inv.SSH.User,
		Packages:    inv.Cluster.Packages.Manage,
		NamesPrefix: names.Prefix,
	}
	if inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		s.VIP = inv.Cluster.Endpoint.VIP
	}
	if s.SSHPort == 0 {
		s.SSHPort = 22
	}
	if s.SSHUser == "" {
		s.SSHUser = "root"
	}
	for _, n := range inv.Nodes {
		ns := &NodeState{
			Name:      n.Name,
			Role:      n.Role,
			Address:   n.Address,
			Prefix:    ones,
			MAC:       n.MAC,
			Interface: n.Interface,
			Netns:     names.Node(n.Name),
			Power:     powerOff,
		}
		if ns.Interface == "" {
			ns.Interface = "eth0"
		}
		if ns.MAC == "" {
			ns.MAC = AddressMAC(n.Address)
		}
		s.Nodes = append(s.Nodes, ns)
	}
	return s
}

// checkLabInventory refuses what the lab cannot emulate safely: every
// address must be an IPv4 address inside the node subnet, which is all the
// lab wires up.
func checkLabInventory(inv *inventory.Inventory, names Names) error {
	_, subnet, err := net.ParseCIDR(inv.Cluster.Network.NodeCIDR)
	if err != nil || subnet.IP.To4() == nil {
		return fmt.Errorf("the lab needs an IPv4 cluster.network.nodeCIDR, got %q", inv.Cluster.Network.NodeCIDR)
	}
	in := func(what, addr string) error {
		ip := net.ParseIP(addr)
		if ip == nil || ip.To4() == nil || !subnet.Contains(ip) {
			return fmt.Errorf("%s %q is not an IPv4 address in %s: the lab only wires up that subnet", what, addr, subnet)
		}
		return nil
	}
	if err := in("cluster.network.gateway", inv.Cluster.Network.Gateway); err != nil {
		return err
	}
	if inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		if err := in("cluster.endpoint.vip", inv.Cluster.Endpoint.VIP); err != nil {
			return err
		}
	}
	for _, n := range inv.Nodes {
		if err := in("node "+n.Name+" address", n.Address); err != nil {
			return err
		}
		if ns := names.Node(n.Name); ns == names.Bridge() || ns == names.Gateway() {
			return fmt.Errorf("node name %q collides with the lab's own namespace %s", n.Name, ns)
		}
		if len(n.Interface) > 15 {
			return fmt.Errorf("node %s: interface name %q is longer than Linux allows (15)", n.Name, n.Interface)
		}
	}
	return nil
}

// warnSSHPaths points out an inventory whose ssh section does not use the
// key and known_hosts this lab writes: the provisioner would fail to log in.
func (l *Lab) warnSSHPaths(inv *inventory.Inventory) {
	if inv.SSH.PrivateKey != "" && inv.SSH.PrivateKey != l.KeyPath() {
		l.logf("lab: warning: the inventory's ssh.privateKey is %s but this lab's key is %s", inv.SSH.PrivateKey, l.KeyPath())
	}
	if inv.SSH.KnownHosts != "" && inv.SSH.KnownHosts != l.KnownHostsPath() {
		l.logf("lab: warning: the inventory's ssh.knownHosts is %s but this lab writes %s", inv.SSH.KnownHosts, l.KnownHostsPath())
	}
	if ch := inv.Cluster.Cilium.Chart; ch != "" && ch != l.ChartPath() {
		l.logf("lab: warning: the inventory's cluster.cilium.chart is %s but this lab's Cilium stand-in chart is %s", ch, l.ChartPath())
	}
}

// Down ends every process and removes every namespace, link and mount the
// state records, then the lab's directory (disks too, unless keepDisks).
// It keeps going past errors and keeps the state if any remain, so a second
// down can finish.
func (l *Lab) Down(keepDisks bool) error {
	if err := requireRoot(); err != nil {
		return err
	}
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	s, err := l.LoadState()
	if IsNoLab(err) {
		l.logf("lab: no lab is up in %s", l.Dir)
		if !keepDisks {
			return l.removeDirContents(false)
		}
		return nil
	}
	if err != nil {
		return err
	}
	errs := []error{l.stopAptServer(s), l.stopRegistry(s), l.stopS3(s), l.stopDHCP(s)}
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		n := s.Nodes[i]
		if n.Power == powerOn {
			errs = append(errs, l.stop(s, n))
		} else {
			errs = append(errs, l.unplugNode(s, n))
		}
	}
	for i := len(s.Links) - 1; i >= 0; i-- {
		k := s.Links[i]
		if br := s.Names().Bridge(); s.hasNetns(br) && netnsExists(br) && linkExists(br, k.Name) {
			errs = append(errs, ip("-n", br, "link", "del", k.Name))
		}
		s.removeLink(k.Name)
	}
	for i := len(s.Netns) - 1; i >= 0; i-- {
		name := s.Netns[i]
		if err := delNetns(name); err != nil {
			errs = append(errs, err)
			continue
		}
		s.removeNetns(name)
	}
	errs = append(errs, releaseNetnsDir(s))
	if err := errors.Join(errs...); err != nil {
		l.saveState(s)
		return err
	}
	if err := os.Remove(l.statePath()); err != nil {
		return err
	}
	return l.removeDirContents(keepDisks)
}
