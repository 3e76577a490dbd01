package lab

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Processes lists each powered-on node's live processes by program name
// (the base name of argv[0]: "kube-apiserver", "keepalived", "kubelet"),
// read from /proc in one pass. A powered-off node has none.
func (l *Lab) Processes() (map[string][]string, error) {
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	byNS := map[uint64]string{}
	out := map[string][]string{}
	for _, n := range s.Nodes {
		out[n.Name] = nil
		if n.Power == powerOn && n.PIDNS != 0 {
			byNS[n.PIDNS] = n.Name
		}
	}
	for _, pid := range allPIDs() {
		ino, err := nsInode(pid, "pid")
		if err != nil {
			continue
		}
		node, ok := byNS[ino]
		if !ok {
			continue
		}
		if state, _, _, err := procStat(pid); err != nil || state == 'Z' {
			continue
		}
		if name := programName(pid); name != "" {
			out[node] = append(out[node], name)
		}
	}
	return out, nil
}

// programName is the program a process runs, or its comm when its
// command line is empty (a kernel thread, an exiting process).
func programName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if name := programOf(data); err == nil && name != "" {
		return name
	}
	return procName(pid)
}

// programOf is the base name of a command line's argv[0]. A program that
// rewrites its title ("sshd: /usr/sbin/sshd -D [listener]", one string)
// is named by the title's first word.
func programOf(cmdline []byte) string {
	arg0, _, _ := strings.Cut(string(cmdline), "\x00")
	arg0, _, _ = strings.Cut(arg0, " ")
	if arg0 = strings.TrimSuffix(arg0, ":"); arg0 == "" {
		return ""
	}
	return filepath.Base(arg0)
}

// Holders lists the powered-on nodes that have addr on an interface (the
// VIP: more than one is a split brain), asking each node's network
// namespace over netlink, without starting a program.
func (l *Lab) Holders(addr string) ([]string, error) {
	want := net.ParseIP(addr)
	if want == nil {
		return nil, fmt.Errorf("%q is not an IP address", addr)
	}
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range s.Nodes {
		if n.Power != powerOn {
			continue
		}
		var has bool
		err := inNetns(n.Netns, func() error {
			var err error
			has, err = hasAddr(want)
			return err
		})
		if err != nil {
			if !netnsExists(n.Netns) {
				continue // powered off meanwhile
			}
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		if has {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

// hasAddr reports whether this thread's network namespace has ip on an
// interface (RTM_GETADDR dump).
func hasAddr(ip net.IP) (bool, error) {
	family := syscall.AF_INET6
	if ip.To4() != nil {
		family, ip = syscall.AF_INET, ip.To4()
	}
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, family)
	if err != nil {
		return false, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWADDR {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return false, err
		}
		for _, a := range attrs {
			if (a.Attr.Type == syscall.IFA_LOCAL || a.Attr.Type == syscall.IFA_ADDRESS) && net.IP(a.Value).Equal(ip) {
				return true, nil
			}
		}
	}
	return false, nil
}

// Reaches says which node the gateway (the LAN, as every client outside
// the cluster sees it) sends packets for addr to: the node whose MAC its
// neighbour entry holds, the last one to answer ARP or announce addr in
// a gratuitous ARP. "" when it has no entry.
func (l *Lab) Reaches(addr string) (string, error) {
	want := net.ParseIP(addr).To4()
	if want == nil {
		return "", fmt.Errorf("%q is not an IPv4 address", addr)
	}
	s, err := l.LoadState()
	if err != nil {
		return "", err
	}
	var mac net.HardwareAddr
	err = inNetns(s.Names().Gateway(), func() error {
		var err error
		mac, err = neighbour(want)
		return err
	})
	if err != nil || mac == nil {
		return "", err
	}
	for _, n := range s.Nodes {
		if m, err := net.ParseMAC(n.MAC); err == nil && n.Power == powerOn && m.String() == mac.String() {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("the gateway sends %s to %s, which is no node's MAC", addr, mac)
}

// neighbour returns the link-layer address this thread's network
// namespace has for ip (RTM_GETNEIGH dump), nil when none is resolved.
func neighbour(ip net.IP) (net.HardwareAddr, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETNEIGH, syscall.AF_INET)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWNEIGH || len(m.Data) < unix.SizeofNdMsg {
			continue
		}
		nd := (*unix.NdMsg)(unsafe.Pointer(&m.Data[0]))
		if nd.State&(unix.NUD_INCOMPLETE|unix.NUD_FAILED) != 0 {
			continue
		}
		var dst net.IP
		var ll net.HardwareAddr
		for b := m.Data[unix.SizeofNdMsg:]; len(b) >= syscall.SizeofRtAttr; {
			a := (*syscall.RtAttr)(unsafe.Pointer(&b[0]))
			if int(a.Len) < syscall.SizeofRtAttr || int(a.Len) > len(b) {
				break
			}
			v := b[syscall.SizeofRtAttr:a.Len]
			switch a.Type {
			case unix.NDA_DST:
				dst = net.IP(v)
			case unix.NDA_LLADDR:
				ll = net.HardwareAddr(v)
			}
			step := (int(a.Len) + syscall.RTA_ALIGNTO - 1) &^ (syscall.RTA_ALIGNTO - 1)
			if step > len(b) {
				break
			}
			b = b[step:]
		}
		if dst.Equal(ip) && len(ll) > 0 {
			return ll, nil
		}
	}
	return nil, nil
}

// NodeHasFile reports whether path exists on a node as its own processes
// see it (through its overlays), read through its PID 1's root, so it
// works on a node cut off the network too. A powered-off node has none.
func (l *Lab) NodeHasFile(node, path string) (bool, error) {
	s, err := l.LoadState()
	if err != nil {
		return false, err
	}
	n, err := s.Node(node)
	if err != nil {
		return false, err
	}
	if n.Power != powerOn || !n.Init.Alive() {
		return false, nil
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d/root/%s", n.Init.PID, strings.TrimPrefix(path, "/")))
	if os.IsNotExist(err) {
		return false, nil
	}
	return err == nil, err
}
