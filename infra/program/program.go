// Package program is the Pulumi program that converges a homelab: it
// renders every node's files from the inventory and the secrets bundle and
// declares, per node, the provider resources that put them in place, in the
// HA bootstrap order. `pulumi up` (Pulumi.yaml) and `homelab up` (the
// Automation API) run this same function.
package program

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Config is everything the program needs; secrets arrive as plain values
// here and are marked secret before they enter any resource.
type Config struct {
	Inventory  *inventory.Inventory
	Bundle     *pki.Bundle
	PrivateKey string
	KnownHosts string
	// IgnorePreflight names kubeadm preflight checks to skip.
	IgnorePreflight []string
	// HostKeys are each node's host key fingerprints as known_hosts has
	// them: accepting a replaced machine's key changes its node's.
	HostKeys map[string]string
	// PackagesKeyring is the keyring cluster.packages.keyring names, read
	// once (nil: the nodes fetch the repository's key).
	PackagesKeyring []byte
	// RuntimeKeyring is the one the runtime repository's keyring names,
	// read as PackagesKeyring.
	RuntimeKeyring []byte
	// SnapshotsS3Keys and SnapshotsS3CA are the off-site bucket's keys
	// and CA (cluster.etcd.snapshots.s3), read once.
	SnapshotsS3Keys inventory.S3Keys
	SnapshotsS3CA   []byte
}

// Commands a node needs before kubeadm can run there: the user installs
// the Kubernetes ones, unless the inventory manages them, and then apt
// must be there to install them.
var (
	workerRequires       = []string{"kubeadm", "kubelet", "systemctl"}
	controlPlaneRequires = []string{"kubeadm", "kubelet", "kubectl", "systemctl"}
	managedRequires      = []string{"apt-get", "dpkg-query", "systemctl"}
	// runtimeRequires: a runtime up manages but does not install (runc
	// comes with it: Debian's and Ubuntu's containerd depend on it).
	runtimeRequires = []string{"containerd"}
)

// OutputMACs is the stack output holding each node's MACs by name.
const OutputMACs = "macs"

// Run returns the program.
func Run(cfg Config) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cl, err := NewCluster(ctx, cfg.Inventory.Cluster.Name, cfg)
		if err != nil {
			return err
		}
		ctx.Export("endpoint", cl.Endpoint)
		ctx.Export("kubeconfig", cl.Kubeconfig)
		ctx.Export("etcdMembers", cl.EtcdMembers)
		ctx.Export("sans", cl.SANs)
		ctx.Export(OutputMACs, cl.MACs)
		return nil
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// connection is the provider's Connection input for a node.
func connection(cfg Config, n inventory.Node) pulumi.Map {
	return pulumi.Map{
		"node":       pulumi.String(n.Name),
		"host":       pulumi.String(n.Address),
		"port":       pulumi.Int(cfg.Inventory.SSH.Port),
		"user":       pulumi.String(cfg.Inventory.SSH.User),
		"privateKey": pulumi.ToSecret(pulumi.String(cfg.PrivateKey)).(pulumi.StringOutput),
		"knownHosts": pulumi.String(cfg.KnownHosts),
	}
}

// nodeFiles declares a node's files; CA and kubeadm files depend on the
// node's Host so a missing tool or a wrong machine stops the run there.
type nodeFiles struct {
	byPath map[string]*FileHandle
	all    []pulumi.Resource
}

func declareFiles(ctx *pulumi.Context, parent pulumi.Resource, conn pulumi.Map, node string, files []file.File, after []pulumi.Resource) (*nodeFiles, error) {
	nf := &nodeFiles{byPath: map[string]*FileHandle{}}
	for _, f := range files {
		if f.Transient {
			continue // its step writes it, uses it and removes it
		}
		if f.Path == netplan.Path {
			continue // a Netplan of its own: declareNetplan
		}
		var content pulumi.StringInput = pulumi.String(string(f.Content))
		if f.Secret {
			content = pulumi.ToSecret(pulumi.String(string(f.Content))).(pulumi.StringOutput)
		}
		args := pulumi.Map{
			"connection": conn,
			"path":       pulumi.String(f.Path),
			"content":    content,
			"mode":       pulumi.Int(int(f.Mode)),
		}
		if f.OnChange != "" {
			args["onChange"] = pulumi.String(f.OnChange)
		}
		if f.Restarts != "" {
			args["restarts"] = pulumi.String(f.Restarts)
		}
		res, err := register(ctx, "File", node+":"+f.Path, args, &FileHandle{}, pulumi.Parent(parent), pulumi.DependsOn(after))
		if err != nil {
			return nil, err
		}
		nf.byPath[f.Path] = res
		nf.all = append(nf.all, res)
	}
	return nf, nil
}

// declareNetplan declares the node's static address (its netplan file,
// validated and applied on the node) after its Host.
func declareNetplan(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, files []file.File, n inventory.Node, conn pulumi.Map, host pulumi.Resource) error {
	var content []byte
	for _, f := range files {
		if f.Path == netplan.Path {
			content = f.Content
		}
	}
	if content == nil {
		return nil
	}
	inv := cfg.Inventory
	prefix, err := netip.ParsePrefix(inv.Cluster.Network.NodeCIDR)
	if err != nil {
		return err
	}
	args := pulumi.Map{
		"connection": conn,
		"content":    pulumi.String(string(content)),
		"interface":  pulumi.String(n.Interface),
		"address":    pulumi.String(fmt.Sprintf("%s/%d", n.Address, prefix.Bits())),
	}
	if n.MAC != "" {
		args["mac"] = pulumi.String(n.MAC)
	}
	if n.IsControlPlane() && inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		args["endpoint"] = pulumi.String(inv.Endpoint())
	}
	// A File wrote it before: its state cannot become a Netplan's, and
	// File's delete leaves this path alone.
	_, err = register(ctx, "Netplan", n.Name+":"+netplan.Path, args, &NetplanHandle{}, pulumi.Parent(parent), pulumi.DependsOn([]pulumi.Resource{host}))
	return err
}

// add takes other's files in.
func (nf *nodeFiles) add(other *nodeFiles) {
	maps.Copy(nf.byPath, other.byPath)
	nf.all = append(nf.all, other.all...)
}

// keep is the files whose path is among paths (in), or not (!in).
func keep(files []file.File, paths []string, in bool) []file.File {
	var out []file.File
	for _, f := range files {
		if slices.Contains(paths, f.Path) == in {
			out = append(out, f)
		}
	}
	return out
}

func (nf *nodeFiles) get(paths ...string) []pulumi.Resource {
	var out []pulumi.Resource
	for _, p := range paths {
		if f, ok := nf.byPath[p]; ok {
			out = append(out, f)
		}
	}
	return out
}

func declareHost(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, n inventory.Node, conn pulumi.Map) (*HostHandle, error) {
	requires := workerRequires
	if n.IsControlPlane() {
		requires = controlPlaneRequires
	}
	if cfg.Inventory.Cluster.Packages.Manage {
		requires = managedRequires
	}
	requires = slices.Clone(requires)
	if rt := cfg.Inventory.Cluster.ContainerRuntime; rt.Manage && rt.Packages == nil {
		// up configures the containerd the node has: one it lacks would
		// fail only at its restart, after other nodes changed.
		requires = append(requires, runtimeRequires...)
	}
	if n.IsControlPlane() {
		if cfg.Inventory.Cluster.Endpoint.Layout == inventory.LayoutVIP {
			requires = append(requires, "keepalived")
		}
		if cfg.Inventory.Cluster.Etcd.Snapshots != nil {
			requires = append(requires, snapshotRequires...)
		}
		if cfg.Inventory.Cluster.Etcd.SnapshotsS3() != nil {
			requires = append(requires, managedRequires...) // rclone's install
		}
	}
	pin, err := cfg.Bundle.CACertHash()
	if err != nil {
		return nil, err
	}
	args := pulumi.Map{
		"connection": conn,
		"address":    pulumi.String(n.Address),
		"mac":        pulumi.String(n.MAC),
		"requires":   pulumi.ToStringArray(requires),
		"clusterCA":  pulumi.String(pin),
	}
	// containerd is checked against the kubelet before kubeadm runs; a
	// runtime on another socket (CRI-O) is the user's to check.
	// A containerd up installs is judged as the inventory pins it
	// (inventory.checkRuntimePackages), not as the node has it now.
	if c := cfg.Inventory.Cluster; c.CRISocket == inventory.DefaultCRISocket && c.ContainerRuntime.Packages == nil {
		args["runtime"] = pulumi.Map{
			"manage":            pulumi.Bool(c.ContainerRuntime.Manage),
			"cgroupDriver":      pulumi.String(kubeadm.CgroupDriver),
			"sandboxImage":      pulumi.String(kubeadm.PauseImage(c.KubernetesVersion)),
			"kubernetesVersion": pulumi.String(c.KubernetesVersion),
		}
	}
	return register(ctx, "Host", n.Name, args, &HostHandle{}, pulumi.Parent(parent))
}

func declareNodeMeta(ctx *pulumi.Context, parent pulumi.Resource, cfg Config, via pulumi.Map, nf roles.NodeFiles, after []pulumi.Resource) error {
	n := nf.Node
	var taints pulumi.Array
	for _, t := range nf.Taints {
		taints = append(taints, pulumi.Map{"key": pulumi.String(t.Key), "value": pulumi.String(t.Value), "effect": pulumi.String(t.Effect)})
	}
	_, err := register(ctx, "NodeMeta", n.Name, pulumi.Map{
		"via":    via,
		"node":   pulumi.String(n.Name),
		"labels": pulumi.ToStringMap(nf.Labels),
		"taints": taints,
		// Known at preview (a Host output would not be while the Host
		// itself changes, as on a re-address).
		"machine": pulumi.String(cfg.HostKeys[n.Name]),
	}, &NodeMetaHandle{}, pulumi.Parent(parent), pulumi.DependsOn(after))
	return err
}

// nodeOf is the node's part of the render.
func nodeOf(r *roles.Rendered, name string) roles.NodeFiles {
	for _, nf := range r.Nodes {
		if nf.Node.Name == name {
			return nf
		}
	}
	return roles.NodeFiles{}
}

func filesOf(r *roles.Rendered, name string) []file.File {
	for _, nf := range r.Nodes {
		if nf.Node.Name == name {
			return nf.Files
		}
	}
	return nil
}

func contentOf(files []file.File, path string) []byte {
	for _, f := range files {
		if f.Path == path {
			return f.Content
		}
	}
	return nil
}
