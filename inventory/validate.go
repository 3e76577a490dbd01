package inventory

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
)

// Kubernetes versions whose kubeadm reads the v1beta4 config API we render.
var (
	minKubernetes = version.MustParseSemantic("v1.31.0")
	// kubeadm supports a control plane one minor version ahead of itself at
	// most; newer minors get a warning, not a refusal.
	testedKubernetes = version.MustParseSemantic(DefaultKubernetesVersion)
)

// Validate checks an inventory (after defaults) and returns warnings, and an
// error listing every problem when it is not fit to render.
func Validate(inv *Inventory) ([]*Problem, error) { return validate(inv, nil, false) }

// looksLikeIPv4 catches strings meant as addresses that are not valid ones
// (10.0.0.999): kubeadm would silently turn them into DNS SANs.
var looksLikeIPv4 = regexp.MustCompile(`^[0-9]+(\.[0-9]+){1,}$`)

// validate checks inv, and with files the files it names (LoadWithFiles).
func validate(inv *Inventory, pos positions, files bool) ([]*Problem, error) {
	ps := &problems{pos: pos}
	c := &inv.Cluster

	if msgs := validation.IsDNS1123Subdomain(c.Name); len(msgs) > 0 {
		ps.errorf("cluster.name", "%q is not a valid name (%s); use lower-case letters, digits and '-', e.g. homelab", c.Name, strings.Join(msgs, "; "))
	}
	checkKubernetesVersion(ps, c.KubernetesVersion)

	nodeNet := checkCIDR(ps, "cluster.network.nodeCIDR", c.Network.NodeCIDR, true)
	podNet := checkCIDR(ps, "cluster.network.podCIDR", c.Network.PodCIDR, false)
	svcNet := checkCIDR(ps, "cluster.network.serviceCIDR", c.Network.ServiceCIDR, false)
	checkOverlap(ps, "cluster.network.podCIDR", podNet, "cluster.network.serviceCIDR", svcNet)
	checkOverlap(ps, "cluster.network.podCIDR", podNet, "cluster.network.nodeCIDR", nodeNet)
	checkOverlap(ps, "cluster.network.serviceCIDR", svcNet, "cluster.network.nodeCIDR", nodeNet)
	if svcNet.IsValid() && svcNet.Addr().Is4() && svcNet.Bits() < 12 {
		ps.errorf("cluster.network.serviceCIDR", "%s is larger than kube-apiserver accepts (at most a /12 for IPv4); use e.g. %s", c.Network.ServiceCIDR, DefaultServiceCIDR)
	}
	// kubeadm gives the kubernetes Service the range's first address and
	// CoreDNS its tenth: a range without a tenth address validates in
	// kubeadm and leaves the cluster without DNS.
	if svcNet.IsValid() && svcNet.Addr().Is4() && svcNet.Bits() > 28 {
		ps.errorf("cluster.network.serviceCIDR", "%s holds %d addresses, too few for the kubernetes Service (its first) and CoreDNS (its tenth); use at least a /28, usually a /12 such as %s", c.Network.ServiceCIDR, 1<<(32-svcNet.Bits()), DefaultServiceCIDR)
	}
	if podNet.IsValid() && podNet.Addr().Is4() {
		// The controller-manager gives each node a /24 out of the pod range.
		if podNet.Bits() > 24 {
			ps.errorf("cluster.network.podCIDR", "%s is smaller than one node's /24 pod range; use a /16 such as %s", c.Network.PodCIDR, DefaultPodCIDR)
		} else if capacity := 1 << (24 - podNet.Bits()); capacity < len(inv.Nodes) {
			ps.errorf("cluster.network.podCIDR", "%s holds pod ranges for %d nodes but %d are declared; use a larger range (smaller prefix)", c.Network.PodCIDR, capacity, len(inv.Nodes))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(c.Network.DNSDomain); len(msgs) > 0 {
		ps.errorf("cluster.network.dnsDomain", "%q is not a valid DNS domain; use e.g. %s", c.Network.DNSDomain, DefaultDNSDomain)
	}

	var gateway netip.Addr
	if c.Network.Gateway != "" {
		gateway = checkHostAddr(ps, "cluster.network.gateway", c.Network.Gateway, nodeNet, "cluster.network.nodeCIDR")
	}
	for i, ns := range c.Network.Nameservers {
		field := fmt.Sprintf("cluster.network.nameservers[%d]", i)
		if a, err := netip.ParseAddr(ns); err != nil {
			ps.errorf(field, "%q is not an IP address; list resolvers by address, e.g. %s", ns, "10.0.0.1")
		} else if a.Zone() != "" {
			// netplan refuses the whole file over one zoned resolver,
			// and the node then comes up without its static address.
			ps.errorf(field, "%q names a zone (%%%s), which netplan's nameservers cannot take; list a resolver address without one (IPv4, or a global or unique-local IPv6 address)", ns, a.Zone())
		}
	}

	checkNodes(ps, inv, nodeNet, gateway)
	checkEndpoint(ps, inv, nodeNet, gateway)

	switch c.KubeProxy.Replacement {
	case ReplacementNone, ReplacementCilium:
	default:
		ps.errorf("cluster.kubeProxy.replacement", "%q is not a kube-proxy replacement; use none (kube-proxy runs) or cilium (Cilium's eBPF replacement)", c.KubeProxy.Replacement)
	}
	switch c.KubeProxy.Mode {
	case "iptables", "ipvs", "nftables":
	default:
		ps.errorf("cluster.kubeProxy.mode", "%q is not a kube-proxy mode (kubeadm would accept it and kube-proxy would fail); use iptables, ipvs or nftables", c.KubeProxy.Mode)
	}
	if m := c.KubeProxy.ConntrackMaxPerCore; m != nil && *m < 0 {
		ps.errorf("cluster.kubeProxy.conntrackMaxPerCore", "%d is negative; use 0 (leave the kernel's limit, for nodes in containers) or a count per core, or leave it out for kube-proxy's default", *m)
	}

	switch c.CNI {
	case CNICilium:
	case CNINone:
		if c.KubeProxy.Replacement == ReplacementCilium {
			ps.errorf("cluster.cni", "none leaves no Cilium to replace kube-proxy (cluster.kubeProxy.replacement: cilium); use cni: cilium, or replacement: none")
		} else {
			ps.warnf("cluster.cni", "none: homelab installs no pod network, so every node stays NotReady (container runtime network not ready) until you install one")
		}
	default:
		ps.errorf("cluster.cni", "%q is not a pod network homelab installs; use cilium, or none to install your own", c.CNI)
	}

	if ch := c.Cilium.Chart; ch != "" {
		if !strings.HasSuffix(ch, ".tgz") && !strings.HasSuffix(ch, ".tar.gz") {
			ps.errorf("cluster.cilium.chart", "%q is not a chart archive; give the .tgz `helm pull cilium/cilium --version X` writes", ch)
		}
	}
	checkGPU(ps, inv)
	checkPackages(ps, inv)
	checkContainerRuntime(ps, inv)
	checkRegistry(ps, inv)
	checkSnapshots(ps, inv)
	checkCertificates(ps, inv)
	checkUpgrade(ps, inv)
	if c.KubeProxy.Replacement == ReplacementCilium && c.Endpoint.Layout == LayoutSingleIP {
		ps.warnf("cluster.kubeProxy.replacement", "cilium in the single-ip layout: without kube-proxy Cilium reaches the API only at %s's address, so the whole pod network depends on that node", c.Endpoint.Node)
	}

	for i, san := range c.ExtraSANs {
		checkNameOrIP(ps, fmt.Sprintf("cluster.extraSANs[%d]", i), san)
	}
	if !strings.HasPrefix(c.CRISocket, "unix://") && !strings.HasPrefix(c.CRISocket, "/") {
		ps.errorf("cluster.criSocket", "%q is not a unix socket; use e.g. %s", c.CRISocket, DefaultCRISocket)
	}

	if inv.SSH.User == "" {
		ps.errorf("ssh.user", "is empty; set the user the provisioner logs in as, e.g. root")
	}
	if inv.SSH.Port < 1 || inv.SSH.Port > 65535 {
		ps.errorf("ssh.port", "%d is not a TCP port; use 1-65535 (usually 22)", inv.SSH.Port)
	}
	if files {
		checkFiles(ps, inv)
	}
	return ps.warnings, ps.err()
}

func checkKubernetesVersion(ps *problems, v string) {
	const path = "cluster.kubernetesVersion"
	if !strings.HasPrefix(v, "v") {
		ps.errorf(path, "%q must look like %s (a leading v, then major.minor.patch)", v, DefaultKubernetesVersion)
		return
	}
	sv, err := version.ParseSemantic(v)
	if err != nil {
		ps.errorf(path, "%q is not a version; use e.g. %s", v, DefaultKubernetesVersion)
		return
	}
	if sv.LessThan(minKubernetes) {
		ps.errorf(path, "%s is older than v1.31, the first release whose kubeadm reads the v1beta4 configs this tool writes; use %s", v, DefaultKubernetesVersion)
		return
	}
	if sv.Major() != 1 || sv.Minor() > testedKubernetes.Minor()+1 {
		ps.errorf(path, "%s is newer than kubeadm's v1beta4 support this tool knows; use at most v1.%d.x", v, testedKubernetes.Minor()+1)
		return
	}
	if sv.Minor() != testedKubernetes.Minor() {
		ps.warnf(path, "%s has not been tested with this tool (it is tested with %s)", v, DefaultKubernetesVersion)
	}
}

func checkCIDR(ps *problems, path, s string, required bool) netip.Prefix {
	if s == "" {
		if required {
			ps.errorf(path, "is required; set the subnet the nodes live on, e.g. 10.0.0.0/24")
		}
		return netip.Prefix{}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		ps.errorf(path, "%q is not a CIDR; write it as address/prefix, e.g. 10.0.0.0/24", s)
		return netip.Prefix{}
	}
	if p.Masked() != p {
		ps.errorf(path, "%s has host bits set; did you mean %s?", s, p.Masked())
		return p.Masked()
	}
	if !p.Addr().Is4() {
		ps.errorf(path, "%s is IPv6; only IPv4 is supported so far", s)
		return netip.Prefix{}
	}
	return p
}

func checkOverlap(ps *problems, pathA string, a netip.Prefix, pathB string, b netip.Prefix) {
	if a.IsValid() && b.IsValid() && a.Overlaps(b) {
		ps.errorf(pathA, "%s overlaps %s %s (kubeadm accepts this, then routing breaks); pick ranges that do not overlap", a, pathB, b)
	}
}

// checkHostAddr validates an IPv4 address that must be a usable host of the
// node subnet.
func checkHostAddr(ps *problems, path, s string, subnet netip.Prefix, subnetPath string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ps.errorf(path, "%q is not an IP address; write it like 10.0.0.120", s)
		return netip.Addr{}
	}
	if !a.Is4() {
		ps.errorf(path, "%s is IPv6; only IPv4 is supported so far", s)
		return netip.Addr{}
	}
	if !subnet.IsValid() {
		return a
	}
	if !subnet.Contains(a) {
		ps.errorf(path, "%s is outside %s %s; use an address inside it or widen the subnet", s, subnetPath, subnet)
		return a
	}
	if a == subnet.Addr() {
		ps.errorf(path, "%s is the network address of %s; use a host address", s, subnet)
	} else if a == broadcast(subnet) && subnet.Bits() < 31 {
		ps.errorf(path, "%s is the broadcast address of %s; use a host address", s, subnet)
	}
	return a
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

var taintEffects = map[string]bool{"NoSchedule": true, "PreferNoSchedule": true, "NoExecute": true}

func checkNodes(ps *problems, inv *Inventory, nodeNet netip.Prefix, gateway netip.Addr) {
	if len(inv.Nodes) == 0 {
		ps.errorf("nodes", "no nodes are declared; list at least one control-plane node")
		return
	}
	names := map[string]int{}
	addrs := map[netip.Addr]int{}
	macs := map[string]int{}
	cps := 0
	for i, n := range inv.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		if n.Name == "" {
			ps.errorf(p+".name", "is required; give the node its hostname, e.g. cp-1")
		} else if msgs := validation.IsDNS1123Label(n.Name); len(msgs) > 0 {
			ps.errorf(p+".name", "%q is not a valid hostname (RFC 1123 label: %s); use lower-case letters, digits and '-'", n.Name, strings.Join(msgs, "; "))
		} else if j, dup := names[n.Name]; dup {
			ps.errorf(p+".name", "%q is already the name of nodes[%d]; node names must be unique", n.Name, j)
		} else {
			names[n.Name] = i
		}
		switch n.Role {
		case RoleControlPlane:
			cps++
		case RoleWorker:
		case "":
			ps.errorf(p+".role", "is required; use control-plane or worker")
		default:
			ps.errorf(p+".role", "%q is not a role; use control-plane or worker", n.Role)
		}
		if n.Address == "" {
			ps.errorf(p+".address", "is required; give the node's static IPv4 address inside cluster.network.nodeCIDR")
		} else if a := checkHostAddr(ps, p+".address", n.Address, nodeNet, "cluster.network.nodeCIDR"); a.IsValid() {
			if j, dup := addrs[a]; dup {
				ps.errorf(p+".address", "%s is already the address of nodes[%d]; addresses must be unique", a, j)
			} else {
				addrs[a] = i
			}
			if a == gateway {
				ps.errorf(p+".address", "%s is the gateway's address; give the node its own", a)
			}
		}
		if n.MAC != "" {
			hw, err := net.ParseMAC(n.MAC)
			if err != nil || len(hw) != 6 {
				ps.errorf(p+".mac", "%q is not a MAC address; write six hex pairs like 52:54:00:0a:00:78 (quote it in YAML; 52-54-00-0a-00-78 is read as the same)", n.MAC)
			} else if j, dup := macs[hw.String()]; dup {
				ps.errorf(p+".mac", "%s is already the MAC of nodes[%d]; MACs must be unique", hw, j)
			} else {
				macs[hw.String()] = i
			}
		}
		if !validInterfaceName(n.Interface) {
			ps.errorf(p+".interface", "%q is not a network interface name (1-15 characters of A-Z, a-z, 0-9 and . _ -), e.g. eth0 or enp3s0", n.Interface)
		}
		for k, v := range n.Labels {
			lp := fmt.Sprintf("%s.labels[%q]", p, k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				ps.errorf(lp, "%q is not a valid label key (%s)", k, strings.Join(msgs, "; "))
			}
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				ps.errorf(lp, "%q is not a valid label value (%s)", v, strings.Join(msgs, "; "))
			}
		}
		for j, t := range n.Taints {
			if _, err := ParseTaint(t); err != nil {
				ps.errorf(fmt.Sprintf("%s.taints[%d]", p, j), "%v", err)
			}
		}
		if n.GPUs != nil {
			switch n.GPUs.Vendor {
			case "nvidia":
			case "":
				ps.errorf(p+".gpus.vendor", "is required when gpus is set; use nvidia")
			default:
				ps.errorf(p+".gpus.vendor", "%q is not supported; only nvidia GPUs are", n.GPUs.Vendor)
			}
			if n.GPUs.Count < 0 {
				ps.errorf(p+".gpus.count", "%d is negative; give the number of GPUs in the node", n.GPUs.Count)
			}
			if n.Role == RoleControlPlane {
				ps.warnf(p+".gpus", "GPUs on a control-plane node get no GPU role; move GPU work to workers")
			}
		}
	}
	switch {
	case cps == 0:
		ps.errorf("nodes", "no node has role control-plane; declare at least one (three for HA)")
	case cps%2 == 0:
		ps.warnf("nodes", "%d control-plane nodes make %d etcd members, whose quorum survives %d failure(s), no more than %d members would; use an odd count", cps, cps, (cps-1)/2, cps-1)
	}
}

// aptVersion is a Debian package version as apt-get install pkg=VERSION
// wants it: the upstream version and the Debian revision (1.20.0-1).
var aptVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(~[0-9A-Za-z.]+)?-[0-9A-Za-z.+~]+$`)

func checkGPU(ps *problems, inv *Inventory) {
	g := inv.Cluster.GPU
	if !aptVersion.MatchString(g.ToolkitVersion) {
		ps.errorf("cluster.gpu.toolkitVersion", "%q is not an apt package version; write the upstream version and the Debian revision, e.g. %s (`apt-cache madison nvidia-container-toolkit` lists them)", g.ToolkitVersion, DefaultToolkitVersion)
	}
	v := g.DevicePlugin.Version
	if _, err := version.ParseSemantic(v); err != nil || !strings.HasPrefix(v, "v") {
		ps.errorf("cluster.gpu.devicePlugin.version", "%q is not a k8s-device-plugin image tag; use a release tag with its leading v, e.g. %s", v, DefaultDevicePluginVersion)
	}
	if !g.DevicePlugin.Enabled {
		return
	}
	for _, n := range inv.Nodes {
		if n.HasGPUs() && n.GPUs.Vendor == "nvidia" {
			return
		}
	}
	ps.warnf("cluster.gpu.devicePlugin.enabled", "the NVIDIA device plugin is enabled but no node declares nvidia gpus, so its DaemonSet runs nowhere; declare nodes[].gpus or set enabled: false")
}

// ParseTaint reads a taint in kubectl's form key[=value]:Effect.
func ParseTaint(s string) (Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || !taintEffects[effect] {
		return Taint{}, fmt.Errorf("%q is not a taint; write key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return Taint{}, fmt.Errorf("%q has an invalid key (%s)", s, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return Taint{}, fmt.Errorf("%q has an invalid value (%s)", s, strings.Join(msgs, "; "))
	}
	return Taint{Key: k, Value: v, Effect: effect}, nil
}

// Taint is a parsed node taint.
type Taint struct{ Key, Value, Effect string }

// interfaceName is what the kernel calls an interface in practice (15
// bytes, IFNAMSIZ less the NUL) in the characters udev and netplan use: an
// interface name lands in keepalived.conf, netplan and shell commands, so
// nothing that could end a line, a word or a block there gets through.
var interfaceName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

func validInterfaceName(s string) bool {
	return interfaceName.MatchString(s) && s != "." && s != ".."
}

func checkEndpoint(ps *problems, inv *Inventory, nodeNet netip.Prefix, gateway netip.Addr) {
	c := &inv.Cluster
	e := c.Endpoint
	if e.Port < 1 || e.Port > 65535 {
		ps.errorf("cluster.endpoint.port", "%d is not a TCP port; use 1-65535 (usually 6443)", e.Port)
	} else if owner, taken := takenPorts[e.Port]; taken {
		ps.errorf("cluster.endpoint.port", "%d is %s on every control-plane node, so the apiserver could not listen there; use another port, usually 6443", e.Port, owner)
	} else if e.Port == inv.SSH.Port {
		ps.errorf("cluster.endpoint.port", "%d is ssh.port, where sshd listens and homelab reaches the nodes, so the apiserver could not listen there; use another port, usually 6443", e.Port)
	}
	if e.DNSName != "" {
		if msgs := validation.IsDNS1123Subdomain(e.DNSName); len(msgs) > 0 || looksLikeIPv4.MatchString(e.DNSName) {
			ps.errorf("cluster.endpoint.dnsName", "%q is not a DNS name; use a name like k8s.home.arpa", e.DNSName)
		}
	}
	// The VIP is an API SAN in every layout (so moving to the vip layout
	// needs no new certificate), so it is checked wherever it is set: a
	// name or a foreign address would be signed into the certificate.
	if e.VIP != "" {
		if e.Layout == LayoutVIP {
			checkVIP(ps, inv, nodeNet, gateway)
		} else {
			vp := &problems{pos: ps.pos}
			checkVIP(vp, inv, nodeNet, gateway)
			for _, p := range Problems(vp.err()) {
				ps.errorf(p.Path, "%s (in the %s layout the vip is only a name in the API certificate, kept for a later move to the vip layout: fix it or remove it)", p.Message, e.Layout)
			}
		}
	}
	switch e.Layout {
	case LayoutVIP:
		if e.VIP == "" {
			ps.errorf("cluster.endpoint.vip", "is required in the vip layout; pick a free address in cluster.network.nodeCIDR for keepalived to float")
		}
		if c.VRRP.RouterID < 1 || c.VRRP.RouterID > 255 {
			ps.errorf("cluster.vrrp.routerID", "%d is not a VRRP router ID; use 1-255, unique on the LAN", c.VRRP.RouterID)
		}
		if ms := c.VRRP.AdvertIntervalMs; ms < 10 || ms > 40950 || ms%10 != 0 {
			ps.errorf("cluster.vrrp.advertIntervalMs", "%d is not a VRRP advert interval; use 10-40950 in steps of 10 (VRRPv3 counts centiseconds), e.g. 1000", ms)
		}
		// Sub-second adverts need VRRPv3, which has no authentication; the
		// rendered config accepts adverts only from the other control-plane
		// nodes' addresses (check_unicast_src), which keeps out what VRRPv2's
		// clear-text password kept out. What is left is flapping.
		if ms := c.VRRP.AdvertIntervalMs; ms >= 10 && ms < 300 {
			ps.warnf("cluster.vrrp.advertIntervalMs", "%d ms adverts: keepalived declares the VIP's holder dead after about %d ms of silence, so a node stalled that long (an etcd fsync, a kubeadm run on a busy machine) hands the VIP over for nothing; 400 ms (failover in about 1.3 s) is the tested value", ms, 3*ms)
		}
		if c.VRRP.Interface != "" && !validInterfaceName(c.VRRP.Interface) {
			ps.errorf("cluster.vrrp.interface", "%q is not a network interface name (1-15 characters of A-Z, a-z, 0-9 and . _ -), e.g. eth0 or enp3s0", c.VRRP.Interface)
		}
	case LayoutSingleIP:
		n, ok := inv.Node(e.Node)
		switch {
		case e.Node == "":
			ps.errorf("cluster.endpoint.node", "is required in the single-ip layout; name the control-plane node whose address is the endpoint")
		case !ok:
			ps.errorf("cluster.endpoint.node", "%q is not a declared node; name one of the control-plane nodes", e.Node)
		case !n.IsControlPlane():
			ps.errorf("cluster.endpoint.node", "%q is a %s, not a control-plane node; the API only runs on control-plane nodes", e.Node, n.Role)
		default:
			ps.warnf("cluster.endpoint.layout", "single-ip: kubectl, every kubelet and every join reach the API only through %s (%s); if that node dies the cluster loses access even while etcd keeps quorum. Use the vip layout for HA access", e.Node, n.Address)
		}
	case LayoutDNS:
		if e.DNSName == "" {
			ps.errorf("cluster.endpoint.dnsName", "is required in the dns layout; give the name your DNS points at the control-plane nodes")
		}
	default:
		ps.errorf("cluster.endpoint.layout", "%q is not a layout; use vip, single-ip or dns", e.Layout)
	}
}

// takenPorts are the ports kubeadm's control-plane nodes already listen
// on (on every address or on loopback, which a wildcard bind also needs).
var takenPorts = map[int]string{
	22:    "sshd's port (ssh), how homelab reaches the nodes",
	2379:  "etcd's client port",
	2380:  "etcd's peer port",
	10248: "the kubelet's health port",
	10249: "kube-proxy's metrics port",
	10250: "the kubelet's API port",
	10256: "kube-proxy's health port",
	10257: "kube-controller-manager's port",
	10259: "kube-scheduler's port",
}

// checkVIP checks cluster.endpoint.vip: a free host address of the
// nodes' subnet, neither the gateway's nor a node's.
func checkVIP(ps *problems, inv *Inventory, nodeNet netip.Prefix, gateway netip.Addr) {
	vip := checkHostAddr(ps, "cluster.endpoint.vip", inv.Cluster.Endpoint.VIP, nodeNet, "cluster.network.nodeCIDR")
	if !vip.IsValid() {
		return
	}
	if vip == gateway {
		ps.errorf("cluster.endpoint.vip", "%s is the gateway's address; pick a free address", vip)
	}
	for i, n := range inv.Nodes {
		if a, err := netip.ParseAddr(n.Address); err == nil && a == vip {
			ps.errorf("cluster.endpoint.vip", "%s is nodes[%d]'s (%s) own address; the VIP must be a free address, or it cannot move when that node dies", vip, i, n.Name)
		}
	}
}

func checkNameOrIP(ps *problems, path, s string) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			ps.errorf(path, "%q has a zone; certificates cannot carry one", s)
		}
		return
	}
	if looksLikeIPv4.MatchString(s) {
		ps.errorf(path, "%q looks like an IP address but is not one (kubeadm would silently make it a DNS name); fix the address", s)
		return
	}
	if strings.Contains(s, ":") {
		ps.errorf(path, "%q is neither an IP address nor a DNS name", s)
		return
	}
	name := strings.TrimPrefix(s, "*.")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		ps.errorf(path, "%q is neither an IP address nor a DNS name (%s)", s, strings.Join(msgs, "; "))
	}
}
