// Package cilium renders the Helm values that make Cilium replace
// kube-proxy. Without kube-proxy the kubernetes Service is unroutable until
// Cilium runs, so Cilium must reach the API at the cluster's endpoint: the
// VIP or DNS name, never one node's own address unless the user chose the
// single-ip layout (then the whole CNI depends on that node).
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
}

type Cluster struct {
	Name string `json:"name"`
}

// IPAM "kubernetes" uses the per-node pod ranges the controller-manager
// allocates from kubeadm's podSubnet, so Cilium and kubeadm agree.
type IPAM struct {
	Mode string `json:"mode"`
}

// For returns the values for the inventory's endpoint.
func For(inv *inventory.Inventory) Values {
	return Values{
		KubeProxyReplacement: inv.Cluster.KubeProxy.Replacement == inventory.ReplacementCilium,
		K8sServiceHost:       inv.EndpointHost(),
		K8sServicePort:       inv.Cluster.Endpoint.Port,
		Cluster:              Cluster{Name: inv.Cluster.Name},
		IPAM:                 IPAM{Mode: "kubernetes"},
	}
}

// Render marshals the values file.
func Render(inv *inventory.Inventory) ([]byte, error) { return yaml.Marshal(For(inv)) }
