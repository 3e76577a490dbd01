package ciliumagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/homelab-dev/homelab/infra/cniconf"
)

// The pod network of real nodes. Cilium's datapath cannot run here (no
// eBPF in a namespace of a shared kernel), so on real nodes the agent
// stand-in does what kind's kindnetd does with the reference CNI plugins:
// each pod gets a veth to its node (ptp) and an address from the node's
// pod CIDR (host-local), and every node routes the other nodes' pod CIDRs
// to their node addresses. The node network is one L2 segment, so no
// encapsulation and no masquerade is needed: replies find their way back
// by the same routes. Pods then reach each other across nodes, and
// kube-proxy's Services work, as they would with Cilium in routing mode.

// PluginsDir is where the agent's image holds the reference plugins
// (Debian's containernetworking-plugins keeps them there).
const PluginsDir = "/usr/lib/cni"

// Plugins are the reference plugins the conflist uses, and loopback,
// which containerd runs for every sandbox.
var Plugins = []string{"ptp", "host-local", "portmap", "loopback"}

// installReferencePlugins is the install-cni-binaries init container on a
// real node: the plugins from the image into the node's /opt/cni/bin.
func installReferencePlugins(root string) error {
	for _, p := range Plugins {
		src, err := os.Open(filepath.Join(PluginsDir, p))
		if err != nil {
			return err
		}
		data, err := io.ReadAll(src)
		src.Close()
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(root, cniconf.BinDir, p), string(data), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// podConflist is the CNI configuration of a node whose pod CIDR is cidr.
func podConflist(cidr string) (string, error) {
	if _, _, err := net.ParseCIDR(cidr); err != nil {
		return "", fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	type ipam struct {
		Type   string              `json:"type"`
		Ranges [][]map[string]any  `json:"ranges"`
		Routes []map[string]string `json:"routes"`
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "cilium",
		"plugins": []any{
			map[string]any{
				"type": "ptp", "ipMasq": false, "mtu": 1500,
				"ipam": ipam{Type: "host-local", Ranges: [][]map[string]any{{{"subnet": cidr}}}, Routes: []map[string]string{{"dst": "0.0.0.0/0"}}},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n", err
}

// peerRoutes are the routes a node needs to the other nodes' pod CIDRs:
// each via that node's internal address. Nodes without either are left
// out until they have both.
func peerRoutes(nodes []corev1.Node, self string) (map[string]net.IP, string) {
	routes := map[string]net.IP{}
	own := ""
	for _, n := range nodes {
		if n.Spec.PodCIDR == "" {
			continue
		}
		if n.Name == self {
			own = n.Spec.PodCIDR
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip := net.ParseIP(a.Address); ip != nil {
					routes[n.Spec.PodCIDR] = ip
				}
			}
		}
	}
	return routes, own
}

// syncRoutes lists the nodes and routes every other node's pod CIDR to
// it; it returns this node's pod CIDR ("" while none is assigned).
func syncRoutes(ctx context.Context, cs kubernetes.Interface, self string, route func(*net.IPNet, net.IP) error, logf func(string, ...any)) (string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	routes, own := peerRoutes(list.Items, self)
	cidrs := make([]string, 0, len(routes))
	for c := range routes {
		cidrs = append(cidrs, c)
	}
	sort.Strings(cidrs)
	for _, c := range cidrs {
		_, dst, _ := net.ParseCIDR(c)
		if err := route(dst, routes[c]); err != nil {
			return own, fmt.Errorf("route %s via %s: %w", c, routes[c], err)
		}
	}
	return own, nil
}

// replaceRoute sets the node's route to dst via gw, unless it is there.
func replaceRoute(dst *net.IPNet, gw net.IP) error {
	existing, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
	if err == nil && len(existing) == 1 && existing[0].Gw.Equal(gw) {
		return nil
	}
	return netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: gw})
}
