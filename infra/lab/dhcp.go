package lab

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The lab's DHCP server is what a homelab's router is to a machine fresh
// from its installer: real nodes boot with DHCP on their NIC
// (installerNetplan) and get their address from dnsmasq, the DHCP server
// of most home routers, reserved for their MAC as users reserve it on
// their router, until homelab up makes the address static. So the lab
// shows what a user's first up meets: networkd holding a lease, its DHCP
// client running, an installer's file defining the NIC. Stand-in nodes
// run no networkd; the lab sets their address itself (plugNode).

func (l *Lab) dhcpDir() string       { return filepath.Join(l.Dir, "dhcp") }
func (l *Lab) dhcpHostsPath() string { return filepath.Join(l.dhcpDir(), "hosts") }
func (l *Lab) dhcpLogPath() string   { return filepath.Join(l.dhcpDir(), "dnsmasq.log") }

// dhcpLease is how long a lease lasts: a home router's usual hour, so a
// node's client renews while tests run, as it would at home.
const dhcpLease = "1h"

// dhcpHosts is dnsmasq's reservations (its dhcp-hostsfile): one
// MAC,address,name line for each real node.
func dhcpHosts(s *State) string {
	var b strings.Builder
	for _, n := range s.Nodes {
		if n.System == SystemSystemd {
			fmt.Fprintf(&b, "%s,%s,%s\n", n.MAC, n.Address, n.Name)
		}
	}
	return b.String()
}

// dnsmasqArgs serves DHCP alone (no DNS: port 0) on the gateway's end of
// the lab's bridge, to the reserved MACs only (a static range), as the
// lab's authority: a node renewing a lease this server forgot (it was
// restarted) is answered rather than left to time out.
func (l *Lab) dnsmasqArgs(s *State) []string {
	_, cidr, _ := net.ParseCIDR(s.CIDR)
	return []string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
		"--user=root", "--group=root", "--pid-file=",
		"--interface=eth0", "--bind-interfaces",
		fmt.Sprintf("--dhcp-range=%s,static,%s,%s", cidr.IP, net.IP(cidr.Mask), dhcpLease),
		"--dhcp-option=option:router," + s.Gateway,
		"--dhcp-authoritative", "--no-ping",
		"--dhcp-hostsfile=" + l.dhcpHostsPath(),
		"--dhcp-leasefile=" + filepath.Join(l.dhcpDir(), "leases"),
		"--log-dhcp", "--log-facility=" + l.dhcpLogPath(),
	}
}

// startDHCP starts dnsmasq in the gateway namespace with the real nodes'
// reservations, forgetting earlier leases (a router restarted), records
// it and waits until it has read them.
func (l *Lab) startDHCP(s *State) error {
	if err := os.MkdirAll(l.dhcpDir(), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(l.dhcpHostsPath(), []byte(dhcpHosts(s)), 0o600); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(l.dhcpDir(), "leases")); err != nil && !os.IsNotExist(err) {
		return err
	}
	logf, err := os.OpenFile(l.dhcpLogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	before, _ := logf.Seek(0, 2)
	// nsenter without --fork execs dnsmasq: the PID recorded is dnsmasq's.
	cmd := exec.Command("nsenter", append([]string{"--net=" + s.Names().GatewayPath(), "--", "dnsmasq"}, l.dnsmasqArgs(s)...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the lab's DHCP server: %w", err)
	}
	go cmd.Wait()
	p, err := procOf(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("the lab's DHCP server died at once; see %s", l.dhcpLogPath())
	}
	s.DHCPServer = p
	if err := l.saveState(s); err != nil {
		return err
	}
	// It logs reading the reservations once it serves.
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(l.dhcpLogPath())
		if int64(len(data)) > before && strings.Contains(string(data[before:]), "read "+l.dhcpHostsPath()) {
			return nil
		}
		if !p.Alive() || time.Now().After(deadline) {
			return fmt.Errorf("the lab's DHCP server did not start; see %s", l.dhcpLogPath())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *Lab) stopDHCP(s *State) error {
	return stopGatewayServer(&s.DHCPServer, "the lab's DHCP server")
}

// followDHCP gives the DHCP server the real nodes' reservations after a
// node's MAC or address changed (a replaced machine, a readdress).
func (l *Lab) followDHCP(s *State) error {
	if !s.HasSystemd() {
		return nil
	}
	if err := l.stopDHCP(s); err != nil {
		return err
	}
	return l.startDHCP(s)
}
