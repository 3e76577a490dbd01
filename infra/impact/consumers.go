// Package impact predicts what each failure does to a cluster's data (etcd
// quorum, writes) and to its access (every client that dials an API address)
// from the files a render produced, before anything is built. It does no
// I/O: the drills in infra/lab/drill measure the same cells in the emulated
// homelab and a test holds the two equal.
package impact

import (
	"bytes"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// Consumer kinds.
const (
	KindKubectl           = "kubectl"
	KindKubelet           = "kubelet"
	KindControllerManager = "controller-manager"
	KindScheduler         = "scheduler"
	KindClusterInfo       = "cluster-info"
	KindKubeProxy         = "kube-proxy"
	KindCilium            = "cilium"
	KindEtcd              = "apiserver-etcd"
)

// Where an address leads.
const (
	TargetEndpointVIP = "vip"   // the keepalived VIP: whichever node holds it
	TargetDNS         = "dns"   // a name the user keeps pointed at healthy nodes
	TargetNode        = "node"  // one node's own address
	TargetLocal       = "local" // loopback on the consumer's own node
)

// Consumer is one client of an API (or etcd) address.
type Consumer struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Node is where the consumer runs; empty for clients outside the
	// cluster (kubectl on a workstation, a machine about to join).
	Node string `json:"node,omitempty"`
	// Address is host:port as configured.
	Address string `json:"address"`
	// Source says which rendered file, or which kubeadm rule, gave the address.
	Source string `json:"source"`
	Target string `json:"target"`
	// TargetNode is the node whose own address this is (TargetNode only).
	TargetNode string `json:"targetNode,omitempty"`
	// Risk is set when the consumer depends on another node's own address:
	// losing that node loses the consumer though the cluster lives.
	Risk string `json:"risk,omitempty"`
}

// Cluster is what the prediction needs, read from one render.
type Cluster struct {
	Layout   string
	Endpoint string // controlPlaneEndpoint from the rendered ClusterConfiguration
	VIP      string
	DNSName  string
	// ControlPlanes are the etcd members (stacked etcd), in declared order.
	ControlPlanes []string
	Workers       []string
	Addresses     map[string]string // node -> own address
	// Priority is each control-plane node's keepalived priority (vip only).
	Priority map[string]int
	// CheckWeight is what the apiserver check adds to a node's priority
	// while it fails (negative); NoPreempt keeps the VIP where it is when a
	// higher-priority node comes back.
	CheckWeight int
	NoPreempt   bool
	// VIPCleanup names the nodes whose keepalived.service takes the VIP off
	// the interface however keepalived ends (homelab's drop-in): on them, a
	// killed keepalived leaves no second holder.
	VIPCleanup map[string]bool
	Consumers  []Consumer
}

// etcdLocal is where kubeadm points a stacked control-plane node's
// apiserver: its own etcd member only (verified in the emulated homelab:
// --etcd-servers=https://127.0.0.1:2379 on init and joined nodes alike).
const etcdLocal = "127.0.0.1:2379"

var (
	priorityRE = regexp.MustCompile(`(?m)^\s*priority\s+(\d+)`)
	vipRE      = regexp.MustCompile(`(?m)^\s*virtual_ipaddress\s*\{\s*\n\s*([0-9a-fA-F.:]+)(?:/\d+)?`)
	weightRE   = regexp.MustCompile(`(?m)^\s*weight\s+(-?\d+)`)
	preemptRE  = regexp.MustCompile(`(?m)^\s*nopreempt\b`)
	cleanupRE  = regexp.MustCompile(`(?m)^ExecStopPost=-?\S*\bip\s+address\s+del\s`)
)

// Read extracts the cluster's consumers and their addresses from a render.
// The addresses come from the rendered files (the ClusterConfiguration's
// controlPlaneEndpoint, each JoinConfiguration's discovery endpoint and
// localAPIEndpoint, keepalived.conf, Cilium's values) combined with what
// kubeadm 1.34 writes from them, as observed on clusters it built:
//   - admin.conf, cluster-info (kube-public) and kube-proxy's kubeconfig:
//     controlPlaneEndpoint;
//   - a control-plane node's kubelet.conf, controller-manager.conf and
//     scheduler.conf: that node's own localAPIEndpoint (kubeadm 1.34's
//     ControlPlaneKubeletLocalMode, on by default);
//   - a worker's kubelet.conf: the server in cluster-info, which is
//     controlPlaneEndpoint, reached first through the discovery endpoint;
//   - each apiserver's etcd: its own member on 127.0.0.1:2379.
func Read(inv *inventory.Inventory, r *roles.Rendered) (*Cluster, error) {
	c := &Cluster{
		Layout:     inv.Cluster.Endpoint.Layout,
		VIP:        inv.Cluster.Endpoint.VIP,
		DNSName:    inv.Cluster.Endpoint.DNSName,
		Addresses:  map[string]string{},
		Priority:   map[string]int{},
		VIPCleanup: map[string]bool{},
	}
	type local struct{ node, addr string }
	var locals []local
	var workerDiscovery string
	for _, nf := range r.Nodes {
		n := nf.Node
		c.Addresses[n.Name] = n.Address
		for _, f := range nf.Files {
			switch f.Path {
			case kubeadm.InitConfigPath:
				ep, la, err := readInit(f.Content)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", n.Name, f.Path, err)
				}
				c.Endpoint = ep
				locals = append(locals, local{n.Name, la})
			case kubeadm.JoinConfigPath:
				if hasFile(nf.Files, kubeadm.InitConfigPath) {
					continue // the first node's re-join config: unused while it lives
				}
				disc, la, err := readJoin(f.Content)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", n.Name, f.Path, err)
				}
				if la != "" {
					locals = append(locals, local{n.Name, la})
				} else if workerDiscovery == "" {
					workerDiscovery = disc
				}
			case kubeadm.DiscoveryPath:
				// Joins discover the cluster from this kubeconfig's server.
				if !n.IsControlPlane() && workerDiscovery == "" {
					var kc struct {
						Clusters []struct {
							Cluster struct {
								Server string `json:"server"`
							} `json:"cluster"`
						} `json:"clusters"`
					}
					if err := yaml.Unmarshal(f.Content, &kc); err != nil || len(kc.Clusters) == 0 {
						return nil, fmt.Errorf("%s %s: no cluster: %v", n.Name, f.Path, err)
					}
					workerDiscovery = strings.TrimPrefix(kc.Clusters[0].Cluster.Server, "https://")
				}
			case keepalived.ConfigPath:
				m := priorityRE.FindSubmatch(f.Content)
				if m == nil {
					return nil, fmt.Errorf("%s %s: no priority", n.Name, f.Path)
				}
				c.Priority[n.Name], _ = strconv.Atoi(string(m[1]))
				if v := vipRE.FindSubmatch(f.Content); v != nil {
					c.VIP = string(v[1])
				}
				if m := weightRE.FindSubmatch(f.Content); m != nil {
					c.CheckWeight, _ = strconv.Atoi(string(m[1]))
				}
				if preemptRE.Match(f.Content) {
					c.NoPreempt = true
				}
			case keepalived.DropInPath:
				c.VIPCleanup[n.Name] = cleanupRE.Match(f.Content)
			}
		}
		if n.IsControlPlane() {
			c.ControlPlanes = append(c.ControlPlanes, n.Name)
		} else {
			c.Workers = append(c.Workers, n.Name)
		}
	}
	if c.Endpoint == "" {
		return nil, fmt.Errorf("no rendered InitConfiguration: nothing says where the API is")
	}
	if c.Layout != inventory.LayoutVIP {
		c.VIP = "" // only keepalived makes an address float
	}

	add := func(cons Consumer) { c.Consumers = append(c.Consumers, c.classify(cons)) }
	add(Consumer{ID: "kubectl", Kind: KindKubectl, Address: c.Endpoint, Source: "admin.conf: kubeadm writes controlPlaneEndpoint (init.yaml ClusterConfiguration)"})
	discovery := workerDiscovery
	if discovery == "" {
		discovery = c.Endpoint
	}
	add(Consumer{ID: "cluster-info", Kind: KindClusterInfo, Address: discovery, Source: "join.yaml discovery.bootstrapToken.apiServerEndpoint; cluster-info's server is controlPlaneEndpoint"})
	localOf := map[string]string{}
	for _, l := range locals {
		localOf[l.node] = l.addr
	}
	for _, nf := range r.Nodes {
		n := nf.Node.Name
		if la, ok := localOf[n]; ok {
			add(Consumer{ID: "kubelet/" + n, Kind: KindKubelet, Node: n, Address: la, Source: "kubelet.conf: kubeadm 1.34 points a control-plane kubelet at its own localAPIEndpoint"})
		} else {
			add(Consumer{ID: "kubelet/" + n, Kind: KindKubelet, Node: n, Address: c.Endpoint, Source: "kubelet.conf: the server in cluster-info (controlPlaneEndpoint), after TLS bootstrap"})
		}
	}
	for _, l := range locals {
		add(Consumer{ID: "controller-manager/" + l.node, Kind: KindControllerManager, Node: l.node, Address: l.addr, Source: "controller-manager.conf: kubeadm writes the node's localAPIEndpoint"})
		add(Consumer{ID: "scheduler/" + l.node, Kind: KindScheduler, Node: l.node, Address: l.addr, Source: "scheduler.conf: kubeadm writes the node's localAPIEndpoint"})
	}
	ciliumValues := false
	for _, f := range r.Cluster {
		if f.Path != cilium.ValuesPath {
			continue
		}
		var v cilium.Values
		if err := yaml.Unmarshal(f.Content, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		ciliumValues = true
		add(Consumer{ID: "cilium", Kind: KindCilium, Address: net.JoinHostPort(v.K8sServiceHost, strconv.Itoa(v.K8sServicePort)), Source: "cilium-values.yaml k8sServiceHost:k8sServicePort (every node's agent)"})
	}
	if !ciliumValues {
		add(Consumer{ID: "kube-proxy", Kind: KindKubeProxy, Address: c.Endpoint, Source: "kube-proxy ConfigMap kubeconfig.conf: kubeadm writes controlPlaneEndpoint (every node's kube-proxy)"})
	}
	for _, l := range locals {
		add(Consumer{ID: "apiserver-etcd/" + l.node, Kind: KindEtcd, Node: l.node, Address: etcdLocal, Source: "kube-apiserver.yaml --etcd-servers: kubeadm points a stacked apiserver at its own member"})
	}
	return c, nil
}

func readInit(data []byte) (endpoint, localAPI string, err error) {
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta kubeadm.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return "", "", err
		}
		switch meta.Kind {
		case "ClusterConfiguration":
			var cc kubeadm.ClusterConfiguration
			if err := yaml.Unmarshal(doc, &cc); err != nil {
				return "", "", err
			}
			endpoint = cc.ControlPlaneEndpoint
		case "InitConfiguration":
			var ic kubeadm.InitConfiguration
			if err := yaml.Unmarshal(doc, &ic); err != nil {
				return "", "", err
			}
			localAPI = net.JoinHostPort(ic.LocalAPIEndpoint.AdvertiseAddress, strconv.Itoa(int(ic.LocalAPIEndpoint.BindPort)))
		}
	}
	if endpoint == "" {
		return "", "", fmt.Errorf("ClusterConfiguration has no controlPlaneEndpoint")
	}
	return endpoint, localAPI, nil
}

func readJoin(data []byte) (discovery, localAPI string, err error) {
	var jc kubeadm.JoinConfiguration
	if err := yaml.Unmarshal(data, &jc); err != nil {
		return "", "", err
	}
	if jc.Discovery.BootstrapToken != nil {
		discovery = jc.Discovery.BootstrapToken.APIServerEndpoint
	}
	if jc.ControlPlane != nil {
		le := jc.ControlPlane.LocalAPIEndpoint
		localAPI = net.JoinHostPort(le.AdvertiseAddress, strconv.Itoa(int(le.BindPort)))
	}
	return discovery, localAPI, nil
}

// classify says where an address leads, and flags a dependence on another
// node's own address.
func (c *Cluster) classify(cons Consumer) Consumer {
	host, _, err := net.SplitHostPort(cons.Address)
	if err != nil {
		host = cons.Address
	}
	switch {
	case host == "127.0.0.1" || host == "::1" || host == "localhost":
		cons.Target = TargetLocal
	case c.VIP != "" && host == c.VIP:
		cons.Target = TargetEndpointVIP
	case c.DNSName != "" && strings.EqualFold(host, c.DNSName):
		cons.Target = TargetDNS
	default:
		for n, a := range c.Addresses {
			if a == host {
				cons.Target, cons.TargetNode = TargetNode, n
			}
		}
		if cons.Target == "" {
			// An address nothing in the inventory owns: nothing answers it.
			cons.Target = TargetNode
			cons.Risk = "address " + host + " belongs to no declared node"
			return cons
		}
		if cons.TargetNode == cons.Node {
			cons.Target = TargetLocal // its own address: it dies with its node anyway
		} else {
			cons.Risk = "pins " + cons.TargetNode + "'s own address " + host + ": losing " + cons.TargetNode + " loses it"
		}
	}
	return cons
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hasFile(files []file.File, path string) bool {
	for _, f := range files {
		if f.Path == path {
			return true
		}
	}
	return false
}
