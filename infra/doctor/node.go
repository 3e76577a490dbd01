package doctor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// nodeFacts is what one node showed over SSH.
type nodeFacts struct {
	node      inventory.Node
	reached   bool
	err       error
	at        string // the address SSH reached it at
	hostname  string
	macs      []string
	addrs     []string // primary global addresses
	secondary []string // the VIP, when held
	dynamic   []string // addresses held on a DHCP lease
	primary   string
	neigh     map[string][]string // MAC -> addresses, from the node's neighbour table (a moved machine's old one may linger, STALE)
	kubeconfs map[string]string   // path -> server URL
	live      nodefacts.Live      // manifests and certificates
	bindLog   map[string]string   // component -> its last bind failure
	gpus      gpu.Detection
	gpusRead  bool
	netplan   *netplan.Live // nil: not read
	cni       cniFacts
	expiry    []nodefacts.Expiry
	snapshots *snapshotFacts
	offsite   *offsiteFacts
	runtime   runtimeFacts
}

// nodeArgs are doctor/node's values.
type nodeArgs struct {
	Live          nodeprobes.LiveArgs
	KubeletConfig string
	// CertsD is where the product writes mirrors' hosts.toml.
	CertsD string
}

// probeScript reads all doctor checks a node by, in one session.
var probeScript = scripts.Render("doctor/node", nodeArgs{Live: nodeprobes.LiveAt(""), KubeletConfig: nodefacts.KubeletConfigFile, CertsD: containerd.CertsD})

func (d *doctor) dialNode(ctx context.Context, n inventory.Node, at, keyAs string) (*ssh.Client, error) {
	inv := d.t.Inventory
	dial := d.t.Dial
	port := inv.SSH.Port
	if port == 0 {
		port = 22
	}
	// The host key is checked under keyAs while the connection goes to at:
	// a node found on a new address proves it is the same machine by the
	// key known_hosts has for its old one.
	redirect := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, net.JoinHostPort(at, fmt.Sprint(port)))
	}
	return ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: keyAs, Port: port, User: inv.SSH.User, PrivateKey: d.t.PrivateKey, KnownHosts: d.t.KnownHosts},
		ssh.WithDialer(redirect), ssh.WithCommandLog(d.t.CommandLog), ssh.WithRetry(0), ssh.WithTimeout(8*time.Second), ssh.WithKeepAlive(0))
}

func (d *doctor) probeNode(ctx context.Context, n inventory.Node) *nodeFacts {
	f := &nodeFacts{node: n}
	c, err := d.dialNode(ctx, n, n.Address, n.Address)
	if err != nil {
		f.err = err
		return f
	}
	defer c.Close()
	d.collect(ctx, c, f, n.Address)
	return f
}

func (d *doctor) collect(ctx context.Context, c *ssh.Client, f *nodeFacts, at string) {
	f.reached, f.at = true, at
	f.neigh, f.bindLog = map[string][]string{}, map[string]string{}
	res, err := c.Query(ctx, probeScript.String())
	if err != nil {
		f.err = err
		return
	}
	f.live = nodefacts.ParseProbe(string(res.Stdout))
	f.expiry = nodefacts.ParseExpiry(string(res.Stdout))
	f.kubeconfs = f.live.Kubeconfigs
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch {
		case k == "hostname":
			f.hostname = v
		case k == "mac":
			f.macs = append(f.macs, strings.ToLower(v))
		case k == "addr":
			f.addrs = append(f.addrs, v)
		case k == "secondary":
			f.secondary = append(f.secondary, v)
		case k == "dynamic":
			f.dynamic = append(f.dynamic, v)
		case k == "neigh":
			if ip, mac, ok := strings.Cut(v, " "); ok {
				f.neigh[strings.ToLower(mac)] = append(f.neigh[strings.ToLower(mac)], ip)
			}
		case strings.HasPrefix(k, "bind."):
			f.bindLog[strings.TrimPrefix(k, "bind.")] = v
		case k == "containerd.version" || k == "containerd.dump" || k == "containerd.stale" || k == "containerd.hosts" || k == "kubelet.cgroupDriver":
			f.runtime.read(k, v)
		}
	}
	if res, err := c.Query(ctx, nodeprobes.GPUDetect().String()); err == nil {
		f.gpus, f.gpusRead = gpu.ParseDetection(string(res.Stdout)), true
	}
	if res, err := c.Query(ctx, nodeprobes.Netplan(f.node.Interface).String()); err == nil {
		if l, err := netplan.ParseRead(string(res.Stdout), netplan.NIC{Name: f.node.Interface, MAC: f.node.MAC}); err == nil {
			f.netplan = &l
		}
	}
	f.cni = readCNI(ctx, c)
	f.primary = at
	if !slices.Contains(f.addrs, at) && len(f.addrs) > 0 {
		f.primary = f.addrs[0]
	}
	if !f.node.IsControlPlane() {
		return
	}
	if d.t.Inventory.Cluster.Etcd.Snapshots != nil {
		f.snapshots = readSnapshots(ctx, c)
	}
	if s3 := d.t.Inventory.Cluster.Etcd.SnapshotsS3(); s3 != nil {
		f.offsite = readOffsite(ctx, c, s3, f.node.Name)
	}
}

// locateMoved finds a node that does not answer at its declared address
// by its MAC in the other nodes' neighbour tables (the seed's incident: a
// DHCP lease moved it), and examines it there.
func (d *doctor) locateMoved(ctx context.Context) {
	for _, n := range d.t.Inventory.Nodes {
		f := d.nodes[n.Name]
		macs := d.t.macsOf(n)
		if f.reached || len(macs) == 0 {
			continue
		}
		var lastErr error
	search:
		for _, o := range d.nodes {
			var seen []string
			for _, mac := range macs {
				seen = append(seen, o.neigh[mac]...)
			}
			for _, at := range seen {
				if at == n.Address {
					continue
				}
				c, err := d.dialNode(ctx, n, at, at)
				if err != nil {
					// known_hosts may know the machine only by its old
					// address: check the key it has there.
					if c, err = d.dialNode(ctx, n, at, n.Address); err != nil {
						lastErr = err
						continue
					}
				}
				d.collect(ctx, c, f, at)
				c.Close()
				break search
			}
		}
		if !f.reached && lastErr != nil {
			f.err = fmt.Errorf("%w; found its MAC elsewhere, but: %v", f.err, lastErr)
		}
	}
}

func (d *doctor) checkVIP() {
	inv := d.t.Inventory
	if inv.Cluster.Endpoint.Layout != inventory.LayoutVIP {
		return
	}
	vip := inv.Cluster.Endpoint.VIP
	var holders []string
	for _, n := range inv.ControlPlanes() {
		if f := d.nodes[n.Name]; f.reached && slices.Contains(f.secondary, vip) {
			holders = append(holders, n.Name)
		}
	}
	switch len(holders) {
	case 1:
		d.r.VIPHolder = holders[0]
		d.r.add("vip", vip, OK, "held by %s", holders[0])
	case 0:
		d.r.add("vip", vip, Fail, "no reachable control-plane node holds the VIP")
		d.r.cause("no control-plane node holds the VIP %s: is keepalived running (systemctl status keepalived) and does any node's apiserver pass the health check?", vip)
	default:
		d.r.add("vip", vip, Fail, "held by %s at once (split brain)", strings.Join(holders, " and "))
		d.r.cause("split brain: %s all hold the VIP %s; check keepalived's unicast peers", strings.Join(holders, ", "), vip)
	}
}

func (d *doctor) checkNode(n inventory.Node) {
	f := d.nodes[n.Name]
	if !f.reached {
		var changed *ssh.HostKeyChangedError
		if errors.As(f.err, &changed) {
			d.r.add("node", n.Name, Fail, "host key changed: %s (known_hosts has %s)", changed.Got, strings.Join(changed.Want, ", "))
			d.r.cause("%s shows a new SSH host key %s: a reinstalled or replaced machine, or an attack. If expected, check it out of band and accept it: homelab hosts accept %s -f INVENTORY", n.Name, changed.Got, n.Name)
			return
		}
		d.r.add("node", n.Name, Fail, "unreachable at %s: %v", n.Address, f.err)
		if macs := d.t.macsOf(n); len(macs) > 0 {
			d.r.cause("%s does not answer at its declared address %s, and its MAC %s was not seen elsewhere: powered off, or moved to an address no neighbour has talked to", n.Name, n.Address, strings.Join(macs, ", "))
		} else {
			d.r.cause("%s does not answer at its declared address %s: powered off, or moved (no MAC is known to look for it elsewhere: declare nodes[].mac, or run doctor with the state of a previous up)", n.Name, n.Address)
		}
		return
	}
	if !slices.Contains(f.addrs, n.Address) {
		d.r.add("node", n.Name, Fail, "has %s, not its declared address %s (MAC %s)", joinOr(f.addrs, "no address"), n.Address, joinOr(f.macs, "?"))
		d.r.cause("%s came back on %s instead of its declared %s (a changed DHCP lease?). kubeadm does not follow an address change (kubeadm #3299): either give the node back %s (a DHCP reservation for MAC %s), or set its address to %s in the inventory and run `homelab up`, which updates etcd's peer URL, regenerates the certificates, manifests, kubeconfigs and keepalived peers",
			n.Name, f.primary, n.Address, n.Address, joinOr(d.t.macsOf(n), strings.Join(f.macs, ", ")), f.primary)
	} else {
		d.checkStatic(n, f)
		d.checkNetplan(n, f)
	}
	if n.MAC != "" {
		want, _ := net.ParseMAC(n.MAC)
		found := false
		for _, m := range f.macs {
			if got, err := net.ParseMAC(m); err == nil && want != nil && got.String() == want.String() {
				found = true
			}
		}
		if found {
			d.r.add("node", n.Name, OK, "MAC %s", n.MAC)
		} else {
			d.r.add("node", n.Name, Fail, "no NIC with the declared MAC %s (it has %s)", n.MAC, joinOr(f.macs, "none"))
			d.r.cause("%s has no NIC with MAC %s (it has %s): a replaced NIC or machine; update nodes[%s].mac in the inventory", n.Name, n.MAC, joinOr(f.macs, "none"), n.Name)
		}
	}
	if f.hostname != "" && f.hostname != n.Name {
		d.r.add("node", n.Name, Warn, "hostname is %q", f.hostname)
	}
	d.checkRuntime(n, f)
	d.checkRuntimeVersion(n, f)
	d.checkMirror(n, f)
	d.checkGPURuntime(n, f)
	d.checkGPUs(n, f)
	d.checkCNI(n, f)
	d.checkExpiry(n, f)
	for p, server := range f.kubeconfs {
		d.audit("kubeconfig", n.Name+":"+p, n, server)
	}
	if n.IsControlPlane() {
		d.checkManifests(n, f)
		d.checkCerts(n, f)
	}
}

// checkStatic adds the node's address row: its declared address is there,
// and static rather than a lease that happens to match today (the seed's
// first incident was such a lease moving).
func (d *doctor) checkStatic(n inventory.Node, f *nodeFacts) {
	if !slices.Contains(f.dynamic, n.Address) {
		d.r.add("node", n.Name, OK, "address %s, static", n.Address)
		return
	}
	d.r.add("node", n.Name, Fail, "address %s is a DHCP lease, not static", n.Address)
	d.r.cause("%s holds its address %s on a DHCP lease, which can move it as it moved the seed's node: `homelab up` applies the static address (/etc/netplan/60-homelab.yaml); where the node has no netplan, make the address static the way its system does", n.Name, n.Address)
}

// checkNetplan adds the node's netplan row: homelab's definition is the
// one that configures the NIC (systemd-networkd's file for it is the one
// generated from 60-homelab.yaml), no other file defines the NIC, and the
// file is as the inventory declares it.
func (d *doctor) checkNetplan(n inventory.Node, f *nodeFacts) {
	l := f.netplan
	switch {
	case l == nil:
		d.r.add("netplan", n.Name, Warn, "not read")
	case !l.Installed:
		d.r.add("netplan", n.Name, OK, "no netplan: the node's own system keeps its address")
	case l.Sha256 == "":
		d.r.add("netplan", n.Name, Fail, "%s is missing", netplan.Path)
		d.r.cause("%s has no %s, so nothing declares its static address: `homelab up` writes and applies it", n.Name, netplan.Path)
	case len(l.Problems) > 0 || len(l.Disable) > 0:
		files := append(append([]string{}, l.Disable...), l.Problems...)
		d.r.add("netplan", n.Name, Fail, "another definition of %s: %s", n.Interface, strings.Join(files, "; "))
		d.r.cause("%s: another netplan file also configures %s, which can keep a DHCP client beside the static address: `homelab up` moves a file that configures only %s aside; edit the others as named", n.Name, n.Interface, n.Interface)
	case l.NetworkFile != netplan.NetworkFileFor(n.Interface):
		from := l.NetworkFile
		if from == "" {
			from = "nothing"
		}
		d.r.add("netplan", n.Name, Fail, "%s is configured from %s, not %s", n.Interface, from, netplan.Path)
		d.r.cause("%s: systemd-networkd does not configure %s from homelab's definition (its file would be %s): `homelab up` applies it; a NIC renamed or another renderer (NetworkManager) does this", n.Name, n.Interface, netplan.NetworkFileFor(n.Interface))
	case !d.netplanDeclared(n, l.Sha256):
		d.r.add("netplan", n.Name, Warn, "%s differs from the inventory: the next up applies it", netplan.Path)
	default:
		d.r.add("netplan", n.Name, OK, "%s owns %s", netplan.Path, n.Interface)
	}
}

// netplanDeclared is whether sha is the checksum of the node's file as
// the inventory renders it.
func (d *doctor) netplanDeclared(n inventory.Node, sha string) bool {
	want, err := netplan.Render(d.t.Inventory, n)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(want)
	return hex.EncodeToString(sum[:]) == sha
}

var ipPattern = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

func addressesIn(s string) []string {
	var out []string
	for _, m := range ipPattern.FindAllString(s, -1) {
		if a, err := netip.ParseAddr(m); err == nil && !a.IsLoopback() && !a.IsUnspecified() && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// bindFlags are the flags whose addresses the component binds or
// announces: one the node lacks is the seed's crash loop.
var bindFlags = map[string][]string{
	nodefacts.Etcd:          {"listen-peer-urls", "listen-client-urls", "initial-advertise-peer-urls", "advertise-client-urls"},
	nodefacts.KubeAPIServer: {"advertise-address", "bind-address"},
}

func (d *doctor) checkManifests(n inventory.Node, f *nodeFacts) {
	nodeNet, _ := netip.ParsePrefix(d.t.Inventory.Cluster.Network.NodeCIDR)
	for _, m := range nodefacts.ControlPlaneComponents {
		fl, ok := f.live.Flags(m)
		if !ok {
			if m == nodefacts.Etcd || m == nodefacts.KubeAPIServer {
				d.r.add("manifest", n.Name+":"+m+".yaml", Fail, "missing")
			}
			continue
		}
		where := n.Name + ":" + nodefacts.Manifest(m)
		d.checkMounts(n, m, f, where)
		bad := false
		var badFlags, badAddrs []string
		for _, k := range bindFlags[m] {
			for _, a := range addressesIn(fl[k]) {
				if slices.Contains(f.addrs, a) {
					continue
				}
				bad = true
				badFlags = append(badFlags, "--"+k)
				if !slices.Contains(badAddrs, a) {
					badAddrs = append(badAddrs, a)
				}
				detail := fmt.Sprintf("--%s uses %s, which the node does not have (it has %s)", k, a, joinOr(f.addrs, "none"))
				if l := f.bindLog[m]; l != "" {
					detail += "; its log: " + strings.TrimSpace(l)
				}
				d.r.add("manifest", where, Fail, "%s", detail)
			}
		}
		switch {
		case len(badFlags) == 0:
		case m == nodefacts.Etcd:
			d.r.cause("%s: etcd is configured for %s (%s in etcd.yaml), an address the node no longer has: it cannot bind it and crash-loops, so this member is down",
				n.Name, strings.Join(badAddrs, ", "), strings.Join(badFlags, ", "))
		default:
			d.r.cause("%s: %s advertises %s (%s in %s.yaml), an address the node no longer has; with its local etcd down it cannot start either",
				n.Name, m, strings.Join(badAddrs, ", "), strings.Join(badFlags, ", "), m)
		}
		if !bad {
			// The rest of the audit: every address hard-coded in the
			// manifest, flag by flag (--initial-cluster is only read on
			// a member's first start, so it breaks nothing later).
			keys := make([]string, 0, len(fl))
			for k := range fl {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if k == "initial-cluster" || k == "initial-cluster-state" {
					continue
				}
				for _, a := range addressesIn(fl[k]) {
					// Only machine addresses can move or die; the
					// service and pod ranges cannot.
					if ip, err := netip.ParseAddr(a); err == nil && nodeNet.IsValid() && !nodeNet.Contains(ip) {
						continue
					}
					d.audit("manifest", where+" --"+k, n, a)
				}
			}
		}
	}
}

// checkMounts: a flag naming a file no volume mounts makes the component
// fail in its container, though the file is right there on the node.
func (d *doctor) checkMounts(n inventory.Node, component string, f *nodeFacts, where string) {
	pod, ok := f.live.Pod(component)
	if !ok {
		return
	}
	for _, u := range nodefacts.UnmountedPaths(pod) {
		d.r.add("manifest", where, Fail, "--%s names %s, which no volume of the pod mounts: %s cannot see it in its container", u.Flag, u.Path, component)
		d.r.cause("%s: %s's --%s names %s, outside every volume mount of its static pod, so it fails in its container (a file the node has is not in the container's filesystem): add a hostPath volume and volumeMount for it to %s (through kubeadm: extraVolumes), or move the file under a mounted directory such as /etc/kubernetes/pki",
			n.Name, component, u.Flag, u.Path, nodefacts.Manifest(component))
	}
}

// audit classifies one hard-coded address: where it is, and what breaks
// if the node it belongs to dies or moves.
func (d *doctor) audit(check, where string, owner inventory.Node, server string) {
	host := server
	if h, _, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")); err == nil {
		host = h
	} else {
		host = strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	}
	inv := d.t.Inventory
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		return
	}
	ep := inv.EndpointHost()
	if host == ep && inv.Cluster.Endpoint.Layout != inventory.LayoutSingleIP {
		d.r.add(check, where, OK, "%s: the endpoint (%s layout): survives any one node", server, inv.Cluster.Endpoint.Layout)
		return
	}
	for _, m := range inv.Nodes {
		live := d.liveAddress(m)
		switch {
		case host == m.Address && live != m.Address:
			d.r.add(check, where, Fail, "%s: %s's old address; it is now at %s", server, m.Name, live)
			d.r.cause("%s still points at %s, %s's old address", where, m.Address, m.Name)
			return
		case host == m.Address && m.Name == owner.Name && host == ep:
			d.r.add(check, where, Warn, "%s: the single-ip endpoint is %s's own address: breaks if %s dies or moves", server, m.Name, m.Name)
			return
		case host == m.Address && m.Name == owner.Name:
			d.r.add(check, where, Note, "%s: %s's own address: breaks if %s moves", server, m.Name, m.Name)
			return
		case host == m.Address:
			d.r.add(check, where, Warn, "%s: %s's address: breaks if %s dies or moves", server, m.Name, m.Name)
			return
		case host == live:
			d.r.add(check, where, Warn, "%s: %s's live address, which the inventory does not declare", server, m.Name)
			return
		}
	}
	d.r.add(check, where, Fail, "%s: no node has this address", server)
	d.r.cause("%s points at %s, which no node has", where, server)
}

func (d *doctor) checkCerts(n inventory.Node, f *nodeFacts) {
	for _, sc := range nodefacts.ServingCerts {
		c, ok := f.live.Cert(sc.File)
		p := sc.File
		where := n.Name + ":" + nodefacts.PKIFile(p)
		if !ok {
			d.r.add("cert sans", where, Fail, "missing or unreadable")
			continue
		}
		want := sc.Required(d.t.Inventory)
		have := nodefacts.SANs(c)
		// A node found on an address the inventory does not declare yet:
		// the certificates must carry that address too before it can
		// serve there.
		for _, m := range d.t.Inventory.ControlPlanes() {
			if live := d.liveAddress(m); live != m.Address && !slices.Contains(have, live) {
				d.r.add("cert sans", where, Fail, "lacks %s, %s's new address", live, m.Name)
				d.r.cause("the control-plane certificates lack %s, %s's new address (%s's %s among them): clients and etcd peers reaching %s there fail TLS, and `kubeadm certs renew` would keep the old SANs (kubeadm #1447)",
					live, m.Name, n.Name, p, m.Name)
			}
		}
		missing, extra := nodefacts.CompareSANs(have, want, sc.AllowedExtras())
		if len(missing) == 0 && len(extra) == 0 {
			d.r.add("cert sans", where, OK, "the required %d SANs", len(want))
			continue
		}
		d.r.add("cert sans", where, Fail, "lacks [%s], has extra [%s]", strings.Join(missing, " "), strings.Join(extra, " "))
		d.r.cause("%s's %s does not carry the required SANs (lacks %s; extra %s): `kubeadm certs renew` would keep them (kubeadm #1447); `homelab up` regenerates it",
			n.Name, p, joinOr(missing, "none"), joinOr(extra, "none"))
	}
}
