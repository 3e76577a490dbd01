// Package keepalived renders the VRRP configuration that floats the API's
// virtual IP between control-plane nodes, and the health check that moves it
// away from a node whose apiserver is down.
package keepalived

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"text/template"

	"github.com/homelab-dev/homelab/inventory"
)

// Paths on the node.
const (
	ConfigPath      = "/etc/keepalived/keepalived.conf"
	CheckScriptPath = "/etc/keepalived/check_apiserver.sh"
	// DropInPath amends the distribution's keepalived.service; systemd
	// reads it at daemon-reload, without restarting keepalived.
	DropInPath = "/etc/systemd/system/keepalived.service.d/10-homelab.conf"
	// Unit reads both only when it starts.
	Unit = "keepalived"
)

// Priorities: the first control-plane node is preferred; a failing health
// check subtracts more than the whole priority spread, so any node with a
// healthy apiserver outranks any node without one. Before `kubeadm init`
// every check fails and the VIP still lands somewhere (weight, not fault),
// so kubeadm can reach the endpoint while it bootstraps.
const (
	topPriority  = 150
	priorityStep = 10
	checkWeight  = -(topPriority - 1)
)

//go:embed keepalived.conf.tmpl
var confText string

//go:embed check_apiserver.sh.tmpl
var checkText string

//go:embed dropin.conf.tmpl
var dropInText string

var (
	confTmpl   = template.Must(template.New("keepalived.conf").Parse(confText))
	checkTmpl  = template.Must(template.New("check_apiserver.sh").Parse(checkText))
	dropInTmpl = template.Must(template.New("keepalived.service drop-in").Parse(dropInText))
)

type confData struct {
	Node, Interface, SourceIP, VIP string
	Peers                          []string
	RouterID, Priority, Weight     int
	AdvertInt                      string
	VRRPVersion                    int
	AuthPass                       string
	CheckScript                    string
}

// ByAddress sorts nodes by address (numerically), the order VRRP
// priorities are given in.
func ByAddress(nodes []inventory.Node) []inventory.Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b inventory.Node) int {
		pa, _ := netip.ParseAddr(a.Address)
		pb, _ := netip.ParseAddr(b.Address)
		return pa.Compare(pb)
	})
	return out
}

// Config renders keepalived.conf for one control-plane node.
func Config(inv *inventory.Inventory, node inventory.Node, vrrpPassword string) ([]byte, error) {
	// By address, not by the order the inventory lists them: the lowest
	// address is the preferred VIP holder, and reordering the inventory
	// changes nothing on any node.
	cps := ByAddress(inv.ControlPlanes())
	idx := -1
	var peers []string
	for i, n := range cps {
		if n.Name == node.Name {
			idx = i
			continue
		}
		peers = append(peers, n.Address)
	}
	if idx < 0 {
		return nil, fmt.Errorf("keepalived: %s is not a control-plane node", node.Name)
	}
	prefix, err := netip.ParsePrefix(inv.Cluster.Network.NodeCIDR)
	if err != nil {
		return nil, fmt.Errorf("keepalived: %w", err)
	}
	priority := topPriority - idx*priorityStep
	if priority < 1 {
		priority = 1
	}
	ms := inv.Cluster.VRRP.AdvertIntervalMs
	d := confData{
		Node:        node.Name,
		Interface:   inv.VRRPInterface(node),
		SourceIP:    node.Address,
		VIP:         fmt.Sprintf("%s/%d", inv.Cluster.Endpoint.VIP, prefix.Bits()),
		Peers:       peers,
		RouterID:    inv.Cluster.VRRP.RouterID,
		Priority:    priority,
		Weight:      checkWeight,
		AdvertInt:   strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64),
		VRRPVersion: 2,
		AuthPass:    vrrpPassword,
		CheckScript: CheckScriptPath,
	}
	// VRRPv2 counts whole seconds; faster adverts need VRRPv3, which has
	// no authentication: check_unicast_src (in the template) takes its
	// place. A backup takes over after 3 adverts of silence plus the skew
	// of its priority: 400 ms adverts fail over in 1.0-1.5 s (measured,
	// p50 1.25 s), 500 ms ones in 1.3-1.8 s, 1 s ones in about 3 s.
	if ms%1000 != 0 {
		d.VRRPVersion = 3
		d.AuthPass = ""
	}
	return execute(confTmpl, d)
}

// DropIn renders the systemd drop-in that takes the VIP off the node when
// keepalived ends without doing so itself. A stopped keepalived removes its
// VIP; a killed one (a crash, the OOM killer) cannot, and the address stays
// on this interface while a backup takes it over: two nodes answering ARP
// for one address, and this one serving a stale VIP until keepalived
// starts again (measured in the lab: 15 s, until the restore). No
// Restart=: a crash-looping top-priority keepalived would take the VIP back
// at each start and drop it at each crash; the next up starts it.
func DropIn(inv *inventory.Inventory, node inventory.Node) ([]byte, error) {
	prefix, err := netip.ParsePrefix(inv.Cluster.Network.NodeCIDR)
	if err != nil {
		return nil, fmt.Errorf("keepalived: %w", err)
	}
	return execute(dropInTmpl, struct{ Node, VIP, Interface string }{
		Node: node.Name, VIP: fmt.Sprintf("%s/%d", inv.Cluster.Endpoint.VIP, prefix.Bits()), Interface: inv.VRRPInterface(node),
	})
}

// CheckScript renders the health check keepalived runs every interval.
func CheckScript(inv *inventory.Inventory) ([]byte, error) {
	return execute(checkTmpl, struct{ Port int }{inv.Cluster.Endpoint.Port})
}

func execute(t *template.Template, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", t.Name(), err)
	}
	return buf.Bytes(), nil
}
