package lab

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homelab-dev/homelab/inventory"
)

// NodeStatus is one node as status reports it.
type NodeStatus struct {
	*NodeState
	// Processes counts the node's live processes.
	Processes int `json:"processes"`
	// SSH is whether sshd accepts connections.
	SSH bool `json:"ssh"`
	// HoldsVIP is whether the VIP is on the node's interface.
	HoldsVIP bool `json:"holdsVIP"`
}

// Status reports the lab's state checked against what is running.
type Status struct {
	Dir   string       `json:"dir"`
	State *State       `json:"state"`
	Nodes []NodeStatus `json:"nodes"`
	// Missing lists recorded namespaces that no longer exist.
	Missing []string `json:"missing,omitempty"`
}

// Status checks every recorded thing against the machine.
func (l *Lab) Status(ctx context.Context) (*Status, error) {
	if err := requireRoot(); err != nil {
		return nil, err
	}
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	st := &Status{Dir: l.Dir, State: s}
	for _, ns := range s.Netns {
		if !netnsExists(ns) {
			st.Missing = append(st.Missing, ns)
		}
	}
	d, err := s.Dialer()
	if err != nil {
		return nil, err
	}
	st.Nodes = make([]NodeStatus, len(s.Nodes))
	var wg sync.WaitGroup
	for i, n := range s.Nodes {
		st.Nodes[i] = NodeStatus{NodeState: n}
		if n.Power != powerOn {
			continue
		}
		ns := &st.Nodes[i]
		ns.Processes = len(pidsInNS(n.PIDNS))
		if s.VIP != "" && n.Role == inventory.RoleControlPlane {
			ns.HoldsVIP = hasAddress(n.Netns, s.VIP)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if c, err := d.DialContext(cctx, "tcp", net.JoinHostPort(n.Address, strconv.Itoa(s.SSHPort))); err == nil {
				c.Close()
				ns.SSH = true
			}
		}()
	}
	wg.Wait()
	return st, nil
}

// hasAddress reports whether an address is configured in a namespace.
func hasAddress(netns, addr string) bool {
	out, err := exec.Command("ip", "-n", netns, "-o", "addr", "show").Output()
	if err != nil {
		return false
	}
	ip := net.ParseIP(addr)
	for _, f := range strings.Fields(string(out)) {
		if a, _, err := net.ParseCIDR(f); err == nil && a.Equal(ip) {
			return true
		}
	}
	return false
}

// Memory returns each running node's memory in KiB: the proportional set
// size of every process in the node, plus the unshare holding it.
func (l *Lab) Memory() (map[string]uint64, error) {
	s, err := l.LoadState()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, n := range s.Nodes {
		if n.Power != powerOn {
			continue
		}
		var kib uint64
		for _, pid := range pidsInNS(n.PIDNS) {
			kib += pssKiB(pid)
		}
		if n.Unshare.Alive() {
			kib += pssKiB(n.Unshare.PID)
		}
		out[n.Name] = kib
	}
	return out, nil
}
