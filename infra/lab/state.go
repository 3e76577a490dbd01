package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// State records everything the lab made, so that down removes exactly that
// and status can report it. It is saved after every step of up, so a failed
// or interrupted up is still cleaned by down.
type State struct {
	Inventory string `json:"inventory"`
	Cluster   string `json:"cluster"`
	// CIDR is the lab subnet; Dialer refuses anything outside it.
	CIDR    string `json:"cidr"`
	Gateway string `json:"gateway"`
	VIP     string `json:"vip,omitempty"`
	SSHPort int    `json:"sshPort"`
	SSHUser string `json:"sshUser"`
	// NamesPrefix is Names.Prefix as up made the lab; empty in a state
	// written before labs had their own names (hl-).
	NamesPrefix string `json:"namesPrefix,omitempty"`
	// Netns lists every network namespace the lab created, in creation order.
	Netns []string `json:"netns"`
	// Links lists the bridge-side ends of the veths (in Names.Bridge); the
	// other end goes with them.
	Links []Link `json:"links"`
	// NetnsDirMounted is true when the lab's first namespace made
	// /run/netns a mount point (iproute2 does), so down undoes it.
	NetnsDirMounted bool `json:"netnsDirMounted,omitempty"`
	// Tools is the read-only layer with the kube, etcd and stand-in binaries.
	Tools string `json:"tools,omitempty"`
	// Rootfs is the installed Debian of the real nodes
	// (infra/tools/build-rootfs.sh), SystemdTools the layer over their
	// /usr: the real kubelet, kubeadm, kubectl and the lab's images.
	Rootfs       string `json:"rootfs,omitempty"`
	SystemdTools string `json:"systemdTools,omitempty"`
	// Packages: the inventory manages its Kubernetes packages, so nodes
	// get kubeadm, kubelet and kubectl from the lab's apt repository,
	// which AptServer serves in the gateway namespace.
	Packages  bool  `json:"packages,omitempty"`
	AptServer *Proc `json:"aptServer,omitempty"`
	// RegistryServer serves the lab's images to real nodes (registry.go).
	RegistryServer *Proc `json:"registryServer,omitempty"`
	// S3Server is the lab's S3-compatible storage (s3.go).
	S3Server *Proc `json:"s3Server,omitempty"`
	// DHCPServer leases real nodes their address (dhcp.go).
	DHCPServer *Proc        `json:"dhcpServer,omitempty"`
	Nodes      []*NodeState `json:"nodes"`
}

// Link is a veth pair: Name in Names.Bridge, Peer (renamed) in Netns.
type Link struct {
	Name  string `json:"name"`
	Netns string `json:"netns"`
	Peer  string `json:"peer"`
}

// NodeState is one node's hardware and power as the lab made it. MAC and
// Address start as the inventory declares and change with replace and
// readdress, which model hardware the inventory has not caught up with.
type NodeState struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Address   string `json:"address"`
	Prefix    int    `json:"prefix"`
	MAC       string `json:"mac"`
	Interface string `json:"interface"`
	Netns     string `json:"netns"`
	Link      string `json:"link"`
	// HostKey is the node's sshd public key in authorized_keys form.
	HostKey string `json:"hostKey"`
	Power   string `json:"power"` // on | off
	// Cut is set while the node's cable is pulled (Cut, Uncut).
	Cut bool `json:"cut,omitempty"`
	// Unshare is the process the lab started (it holds the node's
	// namespaces); Init is PID 1 inside the node. Both host PIDs.
	Unshare *Proc `json:"unshare,omitempty"`
	Init    *Proc `json:"init,omitempty"`
	// PIDNS is the inode of the node's PID namespace: every process in it
	// belongs to the node.
	PIDNS uint64 `json:"pidns,omitempty"`
	// Mounts the node's boot made inside its own mount namespace; they
	// vanish with it and are listed for status.
	Mounts []string `json:"mounts,omitempty"`
	Boots  int      `json:"boots"`
	// System is what the node boots: SystemStandIn or SystemSystemd.
	System string `json:"system,omitempty"`
	// Cgroups are a real node's cgroups on the machine, removed at
	// power-off once its processes are gone.
	Cgroups []string `json:"cgroups,omitempty"`
}

// Names are the machine-wide names the lab was made with.
func (s *State) Names() Names {
	if s.NamesPrefix == "" {
		return Names{Prefix: defaultPrefix}
	}
	return Names{Prefix: s.NamesPrefix}
}

const (
	powerOn  = "on"
	powerOff = "off"
)

// Node returns the node of that name.
func (s *State) Node(name string) (*NodeState, error) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, n.Name)
	}
	return nil, fmt.Errorf("no node %q in the lab (nodes: %v)", name, names)
}

func (s *State) addNetns(name string) {
	for _, n := range s.Netns {
		if n == name {
			return
		}
	}
	s.Netns = append(s.Netns, name)
}

// hasNetns reports whether this lab made the named namespace: names are
// machine-wide, and another lab's hl-cp-1 is not this one's to remove.
func (s *State) hasNetns(name string) bool {
	for _, n := range s.Netns {
		if n == name {
			return true
		}
	}
	return false
}

func (s *State) hasLink(name string) bool {
	for _, k := range s.Links {
		if k.Name == name {
			return true
		}
	}
	return false
}

func (s *State) removeNetns(name string) {
	out := s.Netns[:0]
	for _, n := range s.Netns {
		if n != name {
			out = append(out, n)
		}
	}
	s.Netns = out
}

func (s *State) addLink(k Link) {
	s.removeLink(k.Name)
	s.Links = append(s.Links, k)
}

func (s *State) removeLink(name string) {
	out := s.Links[:0]
	for _, k := range s.Links {
		if k.Name != name {
			out = append(out, k)
		}
	}
	s.Links = out
}

var errNoLab = errors.New("no lab is up (no state file)")

// LoadState reads the lab's state; errNoLab when there is none.
func (l *Lab) LoadState() (*State, error) {
	data, err := os.ReadFile(l.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoLab
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("lab state %s: %w", l.statePath(), err)
	}
	return &s, nil
}

// IsNoLab reports whether err says no lab is up.
func IsNoLab(err error) bool { return errors.Is(err, errNoLab) }

func (l *Lab) saveState(s *State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := l.statePath() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.statePath())
}

// lock serialises lab commands: two ups racing would both create hl-cp-1.
func (l *Lab) lock() (func(), error) {
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := ensureMarker(l); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(l.lockPath(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another homelab-lab command holds %s", l.lockPath())
	}
	return func() { f.Close() }, nil
}

// ensureMarker refuses a non-empty directory that is not a lab's, since
// down removes the directory's contents.
func ensureMarker(l *Lab) error {
	if _, err := os.Stat(l.markerPath()); err == nil {
		return nil
	}
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty and not a lab directory (no %s); choose another with $%s", l.Dir, marker, EnvDir)
	}
	return os.WriteFile(l.markerPath(), []byte("made by homelab-lab; removed by homelab-lab down\n"), 0o644)
}

// removeDirContents deletes what the lab wrote under its directory.
func (l *Lab) removeDirContents(keepDisks bool) error {
	if _, err := os.Stat(l.markerPath()); err != nil {
		return fmt.Errorf("refusing to remove %s: no %s marker", l.Dir, marker)
	}
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch e.Name() {
		case "lock", marker:
			continue
		case "nodes", "ssh", "s3":
			// The kept disks hold the client key in authorized_keys and
			// their host keys are in known_hosts: keep both. The S3
			// server's data is the homelab's NAS: it outlives the nodes.
			if keepDisks {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(l.Dir, e.Name())); err != nil {
			return err
		}
	}
	if keepDisks {
		return nil
	}
	os.Remove(l.lockPath())
	os.Remove(l.markerPath())
	return os.Remove(l.Dir)
}
