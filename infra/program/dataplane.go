package program

import (
	"os"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// Dataplane is kube-proxy or Cilium's replacement of it.
type DataplaneHandle struct {
	pulumi.CustomResourceState
	KubeProxy      pulumi.BoolOutput   `pulumi:"kubeProxy"`
	ReleasePresent pulumi.BoolOutput   `pulumi:"releasePresent"`
	ReleaseValues  pulumi.StringOutput `pulumi:"releaseValues"`
}

// declareDataplane declares the pod network (Cilium) and the swap between
// kube-proxy and Cilium's replacement. It follows init (restoring
// kube-proxy renders the config kubeadm has on the bootstrap node, via) and
// every join: it waits for every declared node to be Ready.
func declareDataplane(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, r *roles.Rendered, via pulumi.Map, init *KubeadmInitHandle, joins []pulumi.Resource) (*DataplaneHandle, error) {
	inv := cfg.Inventory
	var nodes pulumi.Array
	for _, n := range inv.Nodes {
		nodes = append(nodes, connection(cfg, n))
	}
	chart, chartSha := "", ""
	if inv.Cluster.Cilium.Chart != "" {
		chart = inv.Cluster.Cilium.Chart
		// A rebuilt archive at the same path is a new chart.
		if data, err := os.ReadFile(chart); err == nil {
			chartSha = sha(data)
		}
	}
	return register(ctx, "Dataplane", "dataplane", pulumi.Map{
		"via":            via,
		"nodes":          nodes,
		"replacement":    pulumi.String(inv.Cluster.KubeProxy.Replacement),
		"cni":            pulumi.String(inv.Cluster.CNI),
		"clusterUID":     init.ClusterUID,
		"initConfigPath": pulumi.String(kubeadm.InitConfigPath),
		"values":         pulumi.String(string(r.CiliumValues)),
		"chart":          pulumi.String(chart),
		"chartSha":       pulumi.String(chartSha),
		"chartRepo":      pulumi.String(cilium.ChartRepo),
		"chartName":      pulumi.String(cilium.ChartName),
		"chartVersion":   pulumi.String(cilium.ChartVersion),
		"release":        pulumi.String(cilium.Release),
		"namespace":      pulumi.String(cilium.Namespace),
	}, &DataplaneHandle{}, pulumi.Parent(parent), pulumi.DependsOn(append([]pulumi.Resource{init}, joins...)))
}
