package program

import (
	"os"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// EnvPodWait, set to "scheduled", makes the dataplane swap wait only for
// kube-proxy's pods to be created, not ready: for the emulated homelab,
// whose nodes run no containers.
const EnvPodWait = "HOMELAB_POD_WAIT"

// Dataplane is kube-proxy or Cilium's replacement of it.
type Dataplane struct {
	pulumi.CustomResourceState
	KubeProxy      pulumi.BoolOutput   `pulumi:"kubeProxy"`
	ReleasePresent pulumi.BoolOutput   `pulumi:"releasePresent"`
	ReleaseValues  pulumi.StringOutput `pulumi:"releaseValues"`
}

// declareDataplane declares the swap between kube-proxy and Cilium. It
// follows init (which follows the init config file): restoring kube-proxy
// renders the config kubeadm has on the first control-plane node.
func declareDataplane(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, via pulumi.Map, init pulumi.Resource) (*Dataplane, error) {
	inv := cfg.Inventory
	values, err := cilium.Render(inv)
	if err != nil {
		return nil, err
	}
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
		"initConfigPath": pulumi.String(kubeadm.InitConfigPath),
		"values":         pulumi.String(string(values)),
		"chart":          pulumi.String(chart),
		"chartSha":       pulumi.String(chartSha),
		"chartRepo":      pulumi.String(cilium.ChartRepo),
		"chartName":      pulumi.String(cilium.ChartName),
		"chartVersion":   pulumi.String(cilium.ChartVersion),
		"release":        pulumi.String(cilium.Release),
		"namespace":      pulumi.String(cilium.Namespace),
		"wait":           pulumi.String(os.Getenv(EnvPodWait)),
	}, &Dataplane{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{init}))
}
