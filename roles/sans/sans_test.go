package sans

import (
	"slices"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

func inv(layout string, mutate func(*inventory.Inventory)) *inventory.Inventory {
	i := &inventory.Inventory{
		Cluster: inventory.Cluster{
			Endpoint: inventory.Endpoint{Layout: layout, VIP: "10.0.0.100", Port: 6443, Node: "cp-1"},
			Network:  inventory.Network{NodeCIDR: "10.0.0.0/24", ServiceCIDR: "10.96.0.0/12", DNSDomain: "cluster.local"},
		},
		Nodes: []inventory.Node{
			{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.120"},
			{Name: "cp-2", Role: inventory.RoleControlPlane, Address: "10.0.0.121"},
			{Name: "cp-3", Role: inventory.RoleControlPlane, Address: "10.0.0.122"},
			{Name: "gpu-1", Role: inventory.RoleWorker, Address: "10.0.0.130"},
		},
	}
	if mutate != nil {
		mutate(i)
	}
	return i
}

var serviceNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}

func TestAPIServer(t *testing.T) {
	cases := []struct {
		name    string
		inv     *inventory.Inventory
		wantIPs []string
		wantDNS []string
	}{
		{
			name:    "vip layout: VIP, every control-plane address and name, service IP, loopback",
			inv:     inv(inventory.LayoutVIP, nil),
			wantIPs: []string{"10.0.0.100", "10.0.0.120", "10.0.0.121", "10.0.0.122", "10.96.0.1", "127.0.0.1"},
			wantDNS: append([]string{"cp-1", "cp-2", "cp-3"}, serviceNames...),
		},
		{
			name: "single-ip without VIP: no VIP, still every control-plane node",
			inv: inv(inventory.LayoutSingleIP, func(i *inventory.Inventory) {
				i.Cluster.Endpoint.VIP = ""
			}),
			wantIPs: []string{"10.0.0.120", "10.0.0.121", "10.0.0.122", "10.96.0.1", "127.0.0.1"},
			wantDNS: append([]string{"cp-1", "cp-2", "cp-3"}, serviceNames...),
		},
		{
			name: "dns layout with extra SANs, deduplicated",
			inv: inv(inventory.LayoutDNS, func(i *inventory.Inventory) {
				i.Cluster.Endpoint.DNSName = "k8s.home.arpa"
				i.Cluster.ExtraSANs = []string{"192.168.1.50", "api.example.org", "10.0.0.120", "cp-1"}
			}),
			wantIPs: []string{"10.0.0.100", "10.0.0.120", "10.0.0.121", "10.0.0.122", "10.96.0.1", "127.0.0.1", "192.168.1.50"},
			wantDNS: []string{"api.example.org", "cp-1", "cp-2", "cp-3", "k8s.home.arpa", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		},
		{
			name: "re-addressed node: the new address, not the old",
			inv: inv(inventory.LayoutVIP, func(i *inventory.Inventory) {
				i.Nodes[0].Address = "10.0.0.111"
			}),
			wantIPs: []string{"10.0.0.100", "10.0.0.111", "10.0.0.121", "10.0.0.122", "10.96.0.1", "127.0.0.1"},
			wantDNS: append([]string{"cp-1", "cp-2", "cp-3"}, serviceNames...),
		},
		{
			name: "other service range and domain",
			inv: inv(inventory.LayoutVIP, func(i *inventory.Inventory) {
				i.Cluster.Network.ServiceCIDR = "172.20.0.0/16"
				i.Cluster.Network.DNSDomain = "lab.internal"
				i.Nodes = i.Nodes[:1]
			}),
			wantIPs: []string{"10.0.0.100", "10.0.0.120", "127.0.0.1", "172.20.0.1"},
			wantDNS: []string{"cp-1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.lab.internal", "localhost"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := APIServer(tc.inv)
			var ips []string
			for _, ip := range got.IPs {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tc.wantIPs) {
				t.Errorf("IPs %v, want %v", ips, tc.wantIPs)
			}
			if !slices.Equal(got.DNSNames, tc.wantDNS) {
				t.Errorf("DNS %v, want %v", got.DNSNames, tc.wantDNS)
			}
			for _, w := range []string{"gpu-1", "10.0.0.130"} {
				if slices.Contains(got.Strings(), w) {
					t.Errorf("worker %s is in the API SANs", w)
				}
			}
		})
	}
}

func TestEtcd(t *testing.T) {
	got := Etcd(inv(inventory.LayoutVIP, nil)).Strings()
	want := []string{"10.0.0.120", "10.0.0.121", "10.0.0.122", "127.0.0.1", "cp-1", "cp-2", "cp-3", "localhost"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
