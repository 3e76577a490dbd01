package program

import (
	"encoding/base64"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// keepVersion is what a node still holding another Kubernetes version
// than the inventory's is told: the packages move with kubeadm's upgrade
// (KubernetesUpgrade, which ran before), never by an install under a
// running node.
const keepVersion = "Changing the Kubernetes version of a node is kubeadm's upgrade, which this up did not run on this node " +
	"(left out with --upgrade-without, or not a member of the cluster yet): up again including it, or reset it if it is to join afresh"

// declareKubernetesPackages declares, when the inventory manages them
// (cluster.packages.manage), the node's kubeadm, kubelet and kubectl: the
// Kubernetes apt repository for the cluster's minor and the three at the
// declared patch, held, once the node's Host is checked. It returns what
// the node's files and kubeadm steps wait for: the Package, or the Host
// when the user installs the packages.
func declareKubernetesPackages(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map, host *HostHandle, upgraded pulumi.Resource) ([]pulumi.Resource, error) {
	in, ok := kubepkg.For(cfg.Inventory, cfg.PackagesKeyring)
	if !ok {
		return []pulumi.Resource{host, upgraded}, nil
	}
	repo, _ := packagesRepository(cfg)
	pk, err := register(ctx, "Package", n.Name+":kubernetes", pulumi.Map{
		"connection":    conn,
		"names":         pulumi.ToStringArray(in.Packages),
		"pinnedVersion": pulumi.String(in.Version),
		"anyRevision":   pulumi.Bool(true),
		"repository":    repo,
		"keepVersion":   pulumi.String(keepVersion),
		"enable":        pulumi.String(kubepkg.KubeletUnit),
	}, &PackageHandle{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{host, upgraded}))
	return []pulumi.Resource{pk}, err
}

// packagesRepository is the Kubernetes packages' repository as the
// Package and KubernetesUpgrade resources take it, when the inventory
// manages the packages.
func packagesRepository(cfg Config) (pulumi.Map, bool) {
	in, ok := kubepkg.For(cfg.Inventory, cfg.PackagesKeyring)
	if !ok {
		return nil, false
	}
	return aptRepository(in.Keyring, in.SourcesPath, in.Sources, in.Key, in.KeyURL), true
}

// aptRepository is an apt repository as the Package resource takes it:
// its key uploaded when given, else fetched from keyURL on the node.
func aptRepository(keyring, sourcesPath string, sources, key []byte, keyURL string) pulumi.Map {
	repo := pulumi.Map{
		"keyring":     pulumi.String(keyring),
		"sourcesPath": pulumi.String(sourcesPath),
		"sources":     pulumi.String(string(sources)),
	}
	if key != nil {
		repo["key"] = pulumi.String(base64.StdEncoding.EncodeToString(key))
	} else {
		repo["keyURL"] = pulumi.String(keyURL)
	}
	return repo
}
