// Package roles turns a valid inventory and the secrets bundle into every
// file each node gets, at the path where it lands. Each kind of file has its
// own package (kubeadm, keepalived, netplan, ...); this one decides which
// node gets which. Nothing here does I/O, so the same inputs always give
// the same bytes.
package roles

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/base"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/pki"
	"github.com/homelab-dev/homelab/roles/sans"
)

// Rendered is every file of every node, plus cluster-wide artifacts that
// are applied through the API rather than placed on a node.
type Rendered struct {
	Nodes   []NodeFiles
	Cluster []file.File
	// APIServerSANs and EtcdSANs are the SAN sets the API and etcd
	// certificates must carry.
	APIServerSANs, EtcdSANs sans.Set
	// ClusterConfig is kubeadm's ClusterConfiguration, the cluster-wide
	// part of every init config (what kubeadm-config holds).
	ClusterConfig []byte
	// ComponentArgs are the flags each control-plane static pod must run
	// with, by pod name.
	ComponentArgs map[string][]string
	// CiliumValues are the pod network's Helm values.
	CiliumValues []byte
}

// NodeFiles is one node's files, sorted by path, and the labels and taints
// its Node object carries.
type NodeFiles struct {
	Node   inventory.Node
	Files  []file.File
	Labels map[string]string
	Taints []kubeadm.Taint
}

// Render renders every node. The inventory must have passed validation.
func Render(inv *inventory.Inventory, b *pki.Bundle) (*Rendered, error) {
	shared, err := newShared(inv, b)
	if err != nil {
		return nil, err
	}
	cc := kubeadm.Cluster(inv, shared.apiSANs, shared.etcdSANs)
	out := &Rendered{APIServerSANs: shared.apiSANs, EtcdSANs: shared.etcdSANs, ComponentArgs: kubeadm.ComponentArgs(cc)}
	if out.ClusterConfig, err = yaml.Marshal(cc); err != nil {
		return nil, err
	}
	for _, n := range inv.Nodes {
		files, err := shared.node(inv, n)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", n.Name, err)
		}
		out.Nodes = append(out.Nodes, NodeFiles{Node: n, Files: files, Labels: kubeadm.Labels(n), Taints: kubeadm.Taints(n)})
	}
	if out.CiliumValues, err = cilium.Render(inv); err != nil {
		return nil, err
	}
	if out.Cluster, err = clusterFiles(inv, out.CiliumValues); err != nil {
		return nil, err
	}
	return out, nil
}

// shared holds what every node's render reuses, computed once: a 1,000-node
// inventory must not recompute SANs or re-encode CA files per node.
type shared struct {
	bundle            *pki.Bundle
	apiSANs, etcdSANs sans.Set
	caFiles           []file.File
	discovery         []byte
	encryption        []byte
	checkScript       []byte
	vrrpPassword      string
}

func newShared(inv *inventory.Inventory, b *pki.Bundle) (*shared, error) {
	if len(inv.ControlPlanes()) == 0 {
		return nil, fmt.Errorf("no control-plane node to initialise the cluster on")
	}
	s := &shared{
		bundle:       b,
		apiSANs:      sans.APIServer(inv),
		etcdSANs:     sans.Etcd(inv),
		vrrpPassword: b.VRRPPassword,
	}
	var err error
	if s.caFiles, err = b.ControlPlaneFiles(); err != nil {
		return nil, err
	}
	if s.discovery, err = kubeadm.DiscoveryConfig(inv, b.Talos.Certs.K8s.Crt); err != nil {
		return nil, err
	}
	if s.encryption, err = kubeadm.Encryption(b.EncryptionSecret()); err != nil {
		return nil, err
	}
	if s.checkScript, err = keepalived.CheckScript(inv); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *shared) node(inv *inventory.Inventory, n inventory.Node) ([]file.File, error) {
	files := base.Files()
	np, err := netplan.Render(inv, n)
	if err != nil {
		return nil, err
	}
	files = append(files, file.File{Path: netplan.Path, Mode: 0o600, Content: np})

	// Every control-plane node can bootstrap a new cluster, and the init
	// phases that regenerate its certificates and manifests read this.
	if n.IsControlPlane() {
		cfg, err := kubeadm.Init(inv, n, s.apiSANs, s.etcdSANs)
		if err != nil {
			return nil, err
		}
		files = append(files, file.File{Path: kubeadm.InitConfigPath, Mode: 0o600, Content: cfg})
	}
	// Every node can join: a replaced control-plane node re-joins its
	// peers, whichever ran init. Not the single-ip layout's endpoint node,
	// which would join through itself.
	if !inv.IsEndpointNode(n.Name) {
		cfg, err := kubeadm.Join(inv, n, s.bundle.JoinToken(n.Name))
		if err != nil {
			return nil, err
		}
		files = append(files,
			file.File{Path: kubeadm.JoinConfigPath, Mode: 0o600, Content: cfg, Secret: true, Transient: true},
			file.File{Path: kubeadm.DiscoveryPath, Mode: 0o644, Content: s.discovery})
	}

	if n.IsControlPlane() {
		auditPath, audit := kubeadm.Audit()
		files = append(files, s.caFiles...)
		files = append(files, file.File{Path: kubeadm.EncryptionConfig, Mode: 0o600, Content: s.encryption, Secret: true},
			file.File{Path: auditPath, Mode: 0o600, Content: audit})
		if path, authn, ok := kubeadm.Authentication(inv.Cluster.KubernetesVersion); ok {
			files = append(files, file.File{Path: path, Mode: 0o600, Content: authn})
		}
		snapshots, err := etcdsnapshot.Files(inv.Cluster.Etcd.Snapshots, n.Name)
		if err != nil {
			return nil, err
		}
		files = append(files, snapshots...)
		if inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
			conf, err := keepalived.Config(inv, n, s.vrrpPassword)
			if err != nil {
				return nil, err
			}
			dropIn, err := keepalived.DropIn(inv, n)
			if err != nil {
				return nil, err
			}
			files = append(files,
				file.File{Path: keepalived.ConfigPath, Mode: 0o600, Content: conf, Secret: true, Restarts: keepalived.Unit},
				file.File{Path: keepalived.CheckScriptPath, Mode: 0o755, Content: s.checkScript, Restarts: keepalived.Unit},
				// systemd applies a drop-in's ExecStopPost= to the running
				// keepalived at daemon-reload: no restart, no VIP move.
				file.File{Path: keepalived.DropInPath, Mode: 0o644, Content: dropIn, OnChange: "daemon-reload"})
		}
	}
	mirrors := inv.Cluster.RegistryMirrors()
	for _, r := range slices.Sorted(maps.Keys(mirrors)) {
		// containerd reads hosts.toml at each pull: no restart.
		hosts, err := containerd.HostsTOML(containerd.Mirror{Registry: r, URL: mirrors[r]})
		if err != nil {
			return nil, err
		}
		files = append(files, file.File{Path: containerd.HostsPath(r), Mode: 0o644, Content: hosts})
	}
	if inv.Cluster.ContainerRuntime.Manage {
		conf, err := runtimeConfig(inv, n)
		if err != nil {
			return nil, err
		}
		files = append(files, file.File{Path: containerd.ConfigPath, Mode: 0o644, Content: conf, Restarts: containerd.Unit})
	} else if dropIn, ok := gpu.ContainerdDropIn(n); ok {
		// containerd reads its drop-ins only when it starts.
		files = append(files, file.File{Path: gpu.ContainerdDropInPath, Mode: 0o644, Content: dropIn, Restarts: gpu.ContainerdUnit})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func clusterFiles(inv *inventory.Inventory, values []byte) ([]file.File, error) {
	var out []file.File
	if inv.Cluster.KubeProxy.Replacement == inventory.ReplacementCilium {
		out = append(out, file.File{Path: cilium.ValuesPath, Mode: 0o644, Content: values})
	}
	for _, n := range inv.Nodes {
		if gpu.IsNvidia(n) {
			rc, err := gpu.RuntimeClass(kubeadm.GPUPresentLabel, kubeadm.GPUTaintKey)
			if err != nil {
				return nil, err
			}
			out = append(out, file.File{Path: gpu.RuntimeClassPath, Mode: 0o644, Content: rc})
			break
		}
	}
	if dp, ok, err := devicePlugin(inv); err != nil {
		return nil, err
	} else if ok {
		out = append(out, file.File{Path: gpu.DevicePluginPath, Mode: 0o644, Content: dp})
	}
	return out, nil
}

// runtimeConfig is n's containerd configuration when up manages it: the
// kubelet's cgroup driver and kubeadm's pause image, and on an NVIDIA
// node the NVIDIA runtime in the same file (containerd 1.x would let a
// drop-in's CRI section replace this one's). Its format is that of the
// containerd up installs (cluster.containerRuntime.packages), else 1.x's,
// the distributions' containerd: Host refuses a node running another major.
func runtimeConfig(inv *inventory.Inventory, n inventory.Node) ([]byte, error) {
	c := containerd.Config{
		Major:               inv.Cluster.ContainerRuntime.ContainerdMajor(),
		SandboxImage:        kubeadm.PauseImage(inv.Cluster.KubernetesVersion),
		SystemdCgroup:       kubeadm.CgroupDriver == "systemd",
		RestrictOOMScoreAdj: inv.Cluster.ContainerRuntime.RestrictOOMScoreAdj,
	}
	if gpu.IsNvidia(n) {
		c.Runtimes = map[string]string{gpu.RuntimeClassName: gpu.RuntimeBinary}
	}
	return containerd.Render(c)
}

// devicePlugin renders NVIDIA's device plugin when the inventory enables it
// and some node has an NVIDIA GPU: scheduled by the GPU label, tolerating
// every taint the GPU nodes carry.
func devicePlugin(inv *inventory.Inventory) ([]byte, bool, error) {
	if !inv.Cluster.GPU.DevicePlugin.Enabled {
		return nil, false, nil
	}
	var taints []inventory.Taint
	found := false
	for _, n := range inv.Nodes {
		if !gpu.IsNvidia(n) {
			continue
		}
		found = true
		for _, t := range kubeadm.Taints(n) {
			taints = append(taints, inventory.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	if !found {
		return nil, false, nil
	}
	dp, err := gpu.DevicePlugin(inv.Cluster.GPU.DevicePlugin.Version, kubeadm.GPUPresentLabel, taints)
	return dp, err == nil, err
}
