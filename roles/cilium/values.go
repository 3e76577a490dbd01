// Package cilium renders the Helm values of Cilium, the cluster's pod
// network in every mode: with kube-proxy kept it is the CNI alone
// (kubeProxyReplacement false); replacing kube-proxy it also serves
// Services with eBPF. Either way Cilium reaches the API at the cluster's
// endpoint, the VIP or DNS name, never one node's own address unless the
// user chose the single-ip layout (then the whole CNI depends on that
// node): without kube-proxy the kubernetes Service is unroutable until
// Cilium runs.
package cilium

import (
	"github.com/homelab-dev/homelab/inventory"
	"sigs.k8s.io/yaml"
)

// ValuesPath is where the values land in a render (cluster-wide, not on a node).
const ValuesPath = "cilium-values.yaml"

type Values struct {
	KubeProxyReplacement bool    `json:"kubeProxyReplacement"`
	K8sServiceHost       string  `json:"k8sServiceHost"`
	K8sServicePort       int     `json:"k8sServicePort"`
	Cluster              Cluster `json:"cluster"`
	IPAM                 IPAM    `json:"ipam"`
	// RollOutCiliumPods restarts the agents when cilium-config changes:
	// an agent reads kube-proxy-replacement only when it starts, so a swap
	// without it would leave the agents in their old mode.
	RollOutCiliumPods bool     `json:"rollOutCiliumPods"`
	Operator          Operator `json:"operator"`
}

type Cluster struct {
	Name string `json:"name"`
}

// IPAM "kubernetes" uses the per-node pod ranges the controller-manager
// allocates from kubeadm's podSubnet, so Cilium and kubeadm agree.
type IPAM struct {
	Mode string `json:"mode"`
}

// Operator: rolled with the configuration too.
type Operator struct {
	RollOutPods bool `json:"rollOutPods"`
}

// For returns the values for the inventory's endpoint and mode.
func For(inv *inventory.Inventory) Values {
	return Values{
		KubeProxyReplacement: inv.Cluster.KubeProxy.Replacement == inventory.ReplacementCilium,
		K8sServiceHost:       inv.EndpointHost(),
		K8sServicePort:       inv.Cluster.Endpoint.Port,
		Cluster:              Cluster{Name: inv.Cluster.Name},
		IPAM:                 IPAM{Mode: "kubernetes"},
		RollOutCiliumPods:    true,
		Operator:             Operator{RollOutPods: true},
	}
}

// Render marshals the values file.
func Render(inv *inventory.Inventory) ([]byte, error) { return yaml.Marshal(For(inv)) }
