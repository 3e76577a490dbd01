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

// declareRuntimePackages declares, when the inventory pins them
// (cluster.containerRuntime.packages), the node's runc and containerd
// from its own apt sources at those versions, held, once its Host is
// checked; after is the previous node's containerd package. One node at
// a time: a new containerd version is restarted into by dpkg itself, and
// a package that breaks containerd then stops the up at the first node.
// It returns the containerd package, which the node's files (its
// config.toml over the package's) wait for; nil when not pinned.
func declareRuntimePackages(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, host *HostHandle, after pulumi.Resource) (pulumi.Resource, error) {
	rt := cfg.Inventory.Cluster.ContainerRuntime
	if !rt.Manage || rt.Packages == nil {
		return nil, nil
	}
	deps := []pulumi.Resource{host}
	if after != nil {
		deps = append(deps, after)
	}
	runc, err := register(ctx, "Package", n.Name+":runc", runtimePackage(conn, "runc", rt.Packages.Runc), &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn(deps))
	if err != nil {
		return nil, err
	}
	return register(ctx, "Package", n.Name+":"+containerd.Unit, runtimePackage(conn, "containerd", rt.Packages.Containerd), &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{runc}))
}

// runtimePackage is one runtime package's Package arguments: a version
// without a Debian revision pins any revision of it, the newest.
func runtimePackage(conn pulumi.Map, name, version string) pulumi.Map {
	return pulumi.Map{
		"connection":    conn,
		"names":         pulumi.ToStringArray([]string{name}),
		"pinnedVersion": pulumi.String(version),
		"anyRevision":   pulumi.Bool(inventory.UpstreamVersion(version) == version),
	}
}
