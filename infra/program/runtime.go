package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/file"
)

// declareRuntime declares, when the inventory manages the container
// runtime, the node's containerd restarted on its new configuration
// (config.toml written by the node's Files) before any kubeadm step
// talks to it. after is the previous node's: the restarts go one node at
// a time, so a configuration containerd cannot load stops the up at the
// first node, with every other node still running pods. It returns what
// the node's kubeadm steps wait for.
func declareRuntime(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, files []file.File, nf *nodeFiles, after pulumi.Resource) (pulumi.Resource, error) {
	if !cfg.Inventory.Cluster.ContainerRuntime.Manage {
		return nil, nil
	}
	deps := nf.get(containerd.ConfigPath)
	if after != nil {
		deps = append(deps, after)
	}
	return register(ctx, "Service", n.Name+":"+containerd.Unit, pulumi.Map{
		"connection":  conn,
		"name":        pulumi.String(containerd.Unit),
		"trigger":     pulumi.String(file.Trigger(files, containerd.Unit)),
		"keepRunning": pulumi.Bool(true),
	}, &ServiceHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
}
