package program

import (
	"encoding/base64"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// keepVersion is what a node holding another Kubernetes version than the
// inventory's is told: the packages move with kubeadm's upgrade, which up
// does not run yet, never by an install under a running node.
const keepVersion = "Changing the Kubernetes version of a node is kubeadm's upgrade, which up does not run yet: " +
	"set cluster.kubernetesVersion to the version the nodes run, or upgrade them with kubeadm first"

// declareKubernetesPackages declares, when the inventory manages them
// (cluster.packages.manage), the node's kubeadm, kubelet and kubectl: the
// Kubernetes apt repository for the cluster's minor and the three at the
// declared patch, held, once the node's Host is checked. It returns what
// the node's files and kubeadm steps wait for: the Package, or the Host
// when the user installs the packages.
func declareKubernetesPackages(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, host *HostHandle) (pulumi.Resource, error) {
	in, ok := kubepkg.For(cfg.Inventory, cfg.PackagesKeyring)
	if !ok {
		return host, nil
	}
	repo := pulumi.Map{
		"keyring":     pulumi.String(in.Keyring),
		"sourcesPath": pulumi.String(in.SourcesPath),
		"sources":     pulumi.String(string(in.Sources)),
	}
	if in.Key != nil {
		repo["key"] = pulumi.String(base64.StdEncoding.EncodeToString(in.Key))
	} else {
		repo["keyURL"] = pulumi.String(in.KeyURL)
	}
	return register(ctx, "Package", n.Name+":kubernetes", pulumi.Map{
		"connection":    conn,
		"names":         pulumi.ToStringArray(in.Packages),
		"pinnedVersion": pulumi.String(in.Version),
		"anyRevision":   pulumi.Bool(true),
		"repository":    repo,
		"keepVersion":   pulumi.String(keepVersion),
		"enable":        pulumi.String(kubepkg.KubeletUnit),
	}, &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{host}))
}
