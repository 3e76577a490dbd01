// Package netplan renders each node's static network configuration, so an
// address is declared, not leased: the seed's cluster broke when DHCP moved
// a control-plane node.
package netplan

import (
	"fmt"
	"net/netip"

	"github.com/homelab-dev/homelab/inventory"
	"sigs.k8s.io/yaml"
)

// Path on the node; netplan wants it private (0600).
const Path = "/etc/netplan/60-homelab.yaml"

type config struct {
	Network network `json:"network"`
}

type network struct {
	Version   int                 `json:"version"`
	Ethernets map[string]ethernet `json:"ethernets"`
}

type ethernet struct {
	// Renderer is always networkd, which the provider's confirmation and
	// doctor check the NIC against: a global `renderer: NetworkManager`
	// in another file (Ubuntu Desktop's) would otherwise hand the static
	// address to NetworkManager.
	Renderer    string       `json:"renderer"`
	Match       *match       `json:"match,omitempty"`
	SetName     string       `json:"set-name,omitempty"`
	DHCP4       bool         `json:"dhcp4"`
	DHCP6       bool         `json:"dhcp6"`
	Addresses   []string     `json:"addresses"`
	Routes      []route      `json:"routes,omitempty"`
	Nameservers *nameservers `json:"nameservers,omitempty"`
}

type match struct {
	MACAddress string `json:"macaddress"`
}

type route struct {
	To  string `json:"to"`
	Via string `json:"via"`
}

type nameservers struct {
	Addresses []string `json:"addresses"`
}

// Render returns the node's netplan file. With a MAC declared the interface
// is matched by it and renamed, so a NIC that comes up under another name
// still gets the address.
func Render(inv *inventory.Inventory, node inventory.Node) ([]byte, error) {
	prefix, err := netip.ParsePrefix(inv.Cluster.Network.NodeCIDR)
	if err != nil {
		return nil, fmt.Errorf("netplan: %w", err)
	}
	eth := ethernet{
		Renderer:  "networkd",
		Addresses: []string{fmt.Sprintf("%s/%d", node.Address, prefix.Bits())},
	}
	if node.MAC != "" {
		eth.Match = &match{MACAddress: node.MAC}
		eth.SetName = node.Interface
	}
	if gw := inv.Cluster.Network.Gateway; gw != "" {
		eth.Routes = []route{{To: "default", Via: gw}}
	}
	if ns := inv.Cluster.Network.Nameservers; len(ns) > 0 {
		eth.Nameservers = &nameservers{Addresses: ns}
	}
	return yaml.Marshal(config{Network: network{Version: 2, Ethernets: map[string]ethernet{node.Interface: eth}}})
}
