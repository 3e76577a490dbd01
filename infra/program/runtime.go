package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/runtimepkg"
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
	args := pulumi.Map{
		"connection":  conn,
		"name":        pulumi.String(containerd.Unit),
		"trigger":     pulumi.String(file.Trigger(files, containerd.Unit)),
		"keepRunning": pulumi.Bool(true),
	}
	if n.IsControlPlane() {
		inv := cfg.Inventory
		args["controlPlane"] = pulumi.Map{
			"address":  pulumi.String(n.Address),
			"port":     pulumi.Int(inv.Cluster.Endpoint.APIPort()),
			"endpoint": pulumi.String(inv.Endpoint()),
		}
	}
	return register(ctx, "Service", n.Name+":"+containerd.Unit, args, &ServiceHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
}

// declareRuntimePackages declares, when the inventory pins them
// (cluster.containerRuntime.packages), the node's runc and containerd
// from its own apt sources, or Docker's containerd.io from its
// repository, at those versions, held, once its Host is checked; after
// is the previous node's containerd restarted on its configuration
// (build.runtimeDone). One node at a time: a new containerd version is
// restarted into by dpkg itself, and a package that breaks containerd
// then stops the up at the first node. It returns
// the containerd package, which the node's files (its config.toml over
// the package's) wait for; nil when not pinned.
func declareRuntimePackages(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, host *HostHandle, after pulumi.Resource) (pulumi.Resource, error) {
	in, ok := runtimepkg.For(cfg.Inventory, cfg.RuntimeKeyring)
	if !ok {
		return nil, nil
	}
	deps := []pulumi.Resource{host}
	if after != nil {
		deps = append(deps, after)
	}
	var last pulumi.Resource
	for _, pkg := range in.Packages {
		// The one holding containerd keeps containerd's name, whichever
		// package it is: a switch to Docker's is that resource's update.
		name := pkg.Name
		if pkg.Name == runtimepkg.DockerPackage {
			name = containerd.Unit
		}
		args := pulumi.Map{
			"connection":    conn,
			"names":         pulumi.ToStringArray([]string{pkg.Name}),
			"pinnedVersion": pulumi.String(pkg.Version),
			"anyRevision":   pulumi.Bool(pkg.AnyRevision),
		}
		if len(pkg.Replaces) > 0 {
			args["replaces"] = pulumi.ToStringArray(pkg.Replaces)
		}
		if r := in.Repository; r != nil {
			args["repository"] = aptRepository(r.Keyring, r.SourcesPath, r.Sources, r.Key, r.KeyURL)
		}
		res, err := register(ctx, "Package", n.Name+":"+name, args, &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
		if err != nil {
			return nil, err
		}
		deps, last = []pulumi.Resource{res}, res
	}
	return last, nil
}
