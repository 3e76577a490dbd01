// Package sans computes the names and addresses the API server's
// certificate must carry: every way the API can be reached. One pure
// function, so the certificate check after a re-address compares against
// exactly what the renderer asked kubeadm for.
package sans

import (
	"net/netip"
	"sort"

	"github.com/homelab-dev/homelab/inventory"
)

// Set is a certificate's subject alternative names, IPs and DNS names apart.
type Set struct {
	IPs      []netip.Addr
	DNSNames []string
}

// Strings returns IPs then names, each sorted, as kubeadm's certSANs wants.
func (s Set) Strings() []string {
	out := make([]string, 0, len(s.IPs)+len(s.DNSNames))
	for _, ip := range s.IPs {
		out = append(out, ip.String())
	}
	return append(out, s.DNSNames...)
}

// APIServer returns the SANs of kube-apiserver's serving certificate: the
// VIP (when declared, in any layout, so moving to the vip layout needs no new
// certificate), every control-plane node's address and hostname, the DNS
// endpoint name, the extra SANs, loopback, the kubernetes Service's cluster
// IP and its DNS names. The inventory must be valid.
func APIServer(inv *inventory.Inventory) Set {
	b := newBuilder()
	c := inv.Cluster
	b.add(c.Endpoint.VIP)
	for _, n := range inv.ControlPlanes() {
		b.add(n.Address)
		b.add(n.Name)
	}
	b.add(c.Endpoint.DNSName)
	for _, s := range c.ExtraSANs {
		b.add(s)
	}
	b.add("127.0.0.1")
	b.add("localhost")
	if ip, ok := ServiceIP(c.Network.ServiceCIDR); ok {
		b.ips[ip] = true
	}
	domain := c.Network.DNSDomain
	if domain == "" {
		domain = inventory.DefaultDNSDomain
	}
	for _, n := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + domain} {
		b.add(n)
	}
	return b.set()
}

// Etcd returns the extra SANs for etcd's server and peer certificates: every
// control-plane member's address and name, so one ClusterConfiguration
// serves every member and a member's certificate stays valid for its peers.
func Etcd(inv *inventory.Inventory) Set {
	b := newBuilder()
	for _, n := range inv.ControlPlanes() {
		b.add(n.Address)
		b.add(n.Name)
	}
	b.add("127.0.0.1")
	b.add("localhost")
	return b.set()
}

// ServiceIP is the first address of the service range: the kubernetes
// Service's cluster IP, which in-cluster clients dial.
func ServiceIP(cidr string) (netip.Addr, bool) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, false
	}
	return p.Masked().Addr().Next(), true
}

type builder struct {
	ips   map[netip.Addr]bool
	names map[string]bool
}

func newBuilder() *builder {
	return &builder{ips: map[netip.Addr]bool{}, names: map[string]bool{}}
}

func (b *builder) add(s string) {
	if s == "" {
		return
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		b.ips[ip.Unmap()] = true
		return
	}
	b.names[s] = true
}

func (b *builder) set() Set {
	var s Set
	for ip := range b.ips {
		s.IPs = append(s.IPs, ip)
	}
	sort.Slice(s.IPs, func(i, j int) bool { return s.IPs[i].Less(s.IPs[j]) })
	for n := range b.names {
		s.DNSNames = append(s.DNSNames, n)
	}
	sort.Strings(s.DNSNames)
	return s
}
