package doctor

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/infra/readiness"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/cilium"
)

// The pod network, per node: the Node's Ready condition as its kubelet
// posts it, and the CNI configuration its container runtime would load
// from /etc/cni/net.d (containerd's rules, infra/cniconf).

// cniFacts is what a node's CNI directory holds.
type cniFacts struct {
	read    bool
	network cniconf.Network
	err     error // why the runtime would load no network
}

// readCNI lists the node's CNI directory (directories marked with a
// trailing /) and reads the file containerd would load.
func readCNI(ctx context.Context, c *ssh.Client) cniFacts {
	n, err, ok := cniconf.ReadNode(ctx, c)
	return cniFacts{read: ok, network: n, err: err}
}

// cniVerdict judges a node's CNI configuration against cluster.cni.
func cniVerdict(cni string, f cniFacts) (Status, string) {
	switch {
	case f.err != nil && cni == inventory.CNINone:
		return Fail, fmt.Sprintf("%v; cluster.cni is none: the node has no pod network until you install one", f.err)
	case f.err != nil:
		return Fail, fmt.Sprintf("%v; Cilium's agent writes %s when it starts", f.err, cilium.ConfigFile)
	case cni != inventory.CNINone && f.network.File != cilium.ConfigFile:
		return Warn, fmt.Sprintf("the runtime loads %s (network %q), not Cilium's %s: another pod network is installed", f.network.File, f.network.Name, cilium.ConfigFile)
	}
	return OK, fmt.Sprintf("%s (network %q, plugins %s)", f.network.File, f.network.Name, strings.Join(f.network.Plugins, ", "))
}

// checkCNI adds a node's cni row.
func (d *doctor) checkCNI(n inventory.Node, f *nodeFacts) {
	if !f.cni.read {
		return
	}
	st, detail := cniVerdict(d.t.Inventory.Cluster.CNI, f.cni)
	d.r.add("cni", n.Name, st, "%s", detail)
}

// checkNodesReady adds each node's Ready row from the API and names the
// cause of a node without a pod network.
func (d *doctor) checkNodesReady(ctx context.Context) {
	cs, _, err := d.apiClient(ctx)
	if err != nil {
		d.r.add("node ready", "api", Fail, "%v", err)
		return
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.r.add("node ready", "api", Fail, "listing Nodes: %v", err)
		return
	}
	for _, n := range d.t.Inventory.Nodes {
		why := readiness.NotReady(list.Items, n.Name)
		if why == "" {
			d.r.add("node ready", n.Name, OK, "Ready")
			continue
		}
		d.r.add("node ready", n.Name, Fail, "%s", why)
		if !readiness.NoNetwork(why) {
			continue
		}
		detail := "its CNI configuration could not be read"
		if f := d.nodes[n.Name]; f != nil && f.cni.read && f.cni.err != nil {
			detail = f.cni.err.Error()
		}
		if d.t.Inventory.Cluster.CNI == inventory.CNINone {
			d.r.cause("%s is NotReady: its container runtime has no pod network (%s); cluster.cni is none, so install your pod network", n.Name, detail)
		} else {
			d.r.cause("%s is NotReady: its container runtime has no pod network (%s); Cilium's agent on it writes %s when it starts: `homelab up` restarts it", n.Name, detail, cilium.ConfigFile)
		}
	}
}
