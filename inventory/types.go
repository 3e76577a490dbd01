// Package inventory holds the declared homelab: the one file every render,
// provisioning step and drill derives from, its defaults and its validation.
package inventory

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// Layouts of the API endpoint. They decide what kubeadm's
// controlPlaneEndpoint is, and with it whether losing one node loses access.
const (
	LayoutVIP      = "vip"       // a keepalived virtual IP floats between control-plane nodes
	LayoutSingleIP = "single-ip" // one control-plane node's own address (the seed's incident)
	LayoutDNS      = "dns"       // a DNS name the user keeps pointed at healthy nodes
)

// Node roles.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// kube-proxy replacements and modes.
const (
	ReplacementNone   = "none"
	ReplacementCilium = "cilium"
)

// Pod networks (cluster.cni): Cilium, installed by homelab, or none (the
// user brings their own).
const (
	CNICilium = "cilium"
	CNINone   = "none"
)

// Inventory is the declared homelab. Field names are a contract with users'
// files: rename nothing without a migration.
type Inventory struct {
	Cluster Cluster `json:"cluster" yaml:"cluster"`
	SSH     SSH     `json:"ssh" yaml:"ssh"`
	Nodes   []Node  `json:"nodes" yaml:"nodes"`
}

type Cluster struct {
	Name              string    `json:"name" yaml:"name"`
	KubernetesVersion string    `json:"kubernetesVersion" yaml:"kubernetesVersion"`
	Endpoint          Endpoint  `json:"endpoint" yaml:"endpoint"`
	VRRP              VRRP      `json:"vrrp" yaml:"vrrp"`
	Network           Network   `json:"network" yaml:"network"`
	KubeProxy         KubeProxy `json:"kubeProxy" yaml:"kubeProxy"`
	// CNI is the pod network: cilium (default) or none, for a pod network
	// the user installs (nodes stay NotReady until one runs).
	CNI    string `json:"cni" yaml:"cni"`
	Cilium Cilium `json:"cilium,omitempty" yaml:"cilium"`
	GPU    GPU    `json:"gpu" yaml:"gpu"`
	Etcd   Etcd   `json:"etcd,omitempty" yaml:"etcd"`
	// Packages: kubeadm, kubelet and kubectl on every node.
	Packages Packages `json:"packages" yaml:"packages"`
	// ContainerRuntime: containerd's configuration on every node.
	ContainerRuntime ContainerRuntime `json:"containerRuntime" yaml:"containerRuntime"`
	// Registry: where the nodes pull images from.
	Registry Registry `json:"registry,omitempty" yaml:"registry"`
	// Certificates: the leaf certificates' lifetime and renewal.
	Certificates Certificates `json:"certificates" yaml:"certificates"`
	ExtraSANs    []string     `json:"extraSANs,omitempty" yaml:"extraSANs"`
	// CRISocket is where kubeadm and the kubelet find the container runtime.
	CRISocket string `json:"criSocket,omitempty" yaml:"criSocket"`
	// Upgrade: how up rolls the cluster to a new kubernetesVersion.
	Upgrade Upgrade `json:"upgrade" yaml:"upgrade"`
	// AllowCgroupV1 keeps the kubelet running on cgroup v1 hosts from
	// v1.35 on (its failCgroupV1: false), and skips kubeadm's
	// SystemVerification there, as both ask of a user who must.
	AllowCgroupV1 bool `json:"allowCgroupV1,omitempty" yaml:"allowCgroupV1"`
}

type Endpoint struct {
	Layout  string `json:"layout" yaml:"layout"`
	VIP     string `json:"vip,omitempty" yaml:"vip"`
	DNSName string `json:"dnsName,omitempty" yaml:"dnsName"`
	Port    int    `json:"port" yaml:"port"`
	// Node is the control-plane node whose own address is the endpoint in the
	// single-ip layout.
	Node string `json:"node,omitempty" yaml:"node"`
}

type VRRP struct {
	RouterID         int    `json:"routerID" yaml:"routerID"`
	Interface        string `json:"interface,omitempty" yaml:"interface"`
	AdvertIntervalMs int    `json:"advertIntervalMs" yaml:"advertIntervalMs"`
}

type Network struct {
	NodeCIDR    string   `json:"nodeCIDR" yaml:"nodeCIDR"`
	Gateway     string   `json:"gateway" yaml:"gateway"`
	Nameservers []string `json:"nameservers,omitempty" yaml:"nameservers"`
	PodCIDR     string   `json:"podCIDR" yaml:"podCIDR"`
	ServiceCIDR string   `json:"serviceCIDR" yaml:"serviceCIDR"`
	DNSDomain   string   `json:"dnsDomain,omitempty" yaml:"dnsDomain"`
}

type KubeProxy struct {
	Replacement string `json:"replacement" yaml:"replacement"`
	Mode        string `json:"mode" yaml:"mode"`
	// ConntrackMaxPerCore is kube-proxy's conntrack.maxPerCore. nil keeps
	// kube-proxy's default (32768 per core, written to the kernel's
	// nf_conntrack_max); 0 leaves the kernel's limit alone, which a node
	// in a container needs (LXC, a network namespace): there the limit is
	// the host's and read-only, and kube-proxy exits with "open
	// /proc/sys/net/netfilter/nf_conntrack_max: permission denied".
	ConntrackMaxPerCore *int32 `json:"conntrackMaxPerCore,omitempty" yaml:"conntrackMaxPerCore"`
}

// Cilium says where the Cilium chart comes from. Empty Chart: the official
// repository at the pinned version (needs the Internet); a path: a chart
// archive on the machine running homelab, for air-gapped homelabs.
type Cilium struct {
	Chart string `json:"chart,omitempty" yaml:"chart"`
}

// GPU is what GPU workers (nodes declaring gpus) get cluster-wide: the
// pinned NVIDIA container toolkit and, optionally, NVIDIA's device plugin.
type GPU struct {
	// ToolkitVersion is the apt version of nvidia-container-toolkit (and its
	// three sibling packages) installed on GPU workers, e.g. 1.20.0-1.
	ToolkitVersion string       `json:"toolkitVersion" yaml:"toolkitVersion"`
	DevicePlugin   DevicePlugin `json:"devicePlugin" yaml:"devicePlugin"`
}

// DevicePlugin is NVIDIA's k8s-device-plugin DaemonSet, which advertises
// nvidia.com/gpu to the scheduler. Off unless enabled.
type DevicePlugin struct {
	Enabled bool `json:"enabled" yaml:"enabled"`
	// Version is the nvcr.io/nvidia/k8s-device-plugin image tag, e.g. v0.20.1.
	Version string `json:"version" yaml:"version"`
}

// Packages says who installs kubeadm, kubelet and kubectl on the nodes, and
// from where: an apt repository in pkgs.k8s.io's layout (one flat
// repository per Kubernetes minor), signed by a key apt trusts for that
// repository only.
type Packages struct {
	// Manage makes up install the three from Repository at
	// cluster.kubernetesVersion's patch and hold them there (apt-mark
	// hold); false: the user installs them at that version.
	Manage bool `json:"manage" yaml:"manage"`
	// Repository is the repository's URL, MinorPlaceholder standing for
	// the cluster's minor (v1.34), e.g. DefaultPackagesRepository.
	Repository string `json:"repository" yaml:"repository"`
	// Keyring is a dearmored OpenPGP keyring on the machine running
	// homelab holding the key that signs Repository; it is uploaded to the
	// nodes. Empty: each node fetches the repository's Release.key.
	Keyring string `json:"keyring,omitempty" yaml:"keyring"`
}

// ContainerRuntime says who configures containerd, which the kubelet runs
// pods with. The two must agree on the cgroup driver and the sandbox
// image, or pods fail; a distribution's containerd package agrees on
// neither.
type ContainerRuntime struct {
	// Manage makes up write /etc/containerd/config.toml (runc on the
	// kubelet's systemd cgroup driver, kubeadm's pause image as the
	// sandbox, conf.d imported, mirrors from certs.d) and restart
	// containerd node by node when it changes; false: the user configures
	// it, and up checks it before kubeadm runs.
	Manage bool `json:"manage" yaml:"manage"`
	// RestrictOOMScoreAdj is for nodes whose root lacks CAP_SYS_RESOURCE
	// (an LXC container, the emulated homelab's namespaces): runc there
	// cannot give a sandbox the OOM score the kubelet asks for, and every
	// pod fails with "can't get final child's PID from pipe: EOF".
	RestrictOOMScoreAdj bool `json:"restrictOOMScoreAdj,omitempty" yaml:"restrictOOMScoreAdj"`
	// Packages, when set, makes up install containerd and runc from the
	// node's own apt sources (the distribution's), or Docker's
	// containerd.io from Repository, at these versions and hold them
	// there; unset, the node must have containerd already.
	Packages *RuntimePackages `json:"packages,omitempty" yaml:"packages"`
}

// RuntimePackages are the apt versions of the runtime's packages: an
// upstream version (1.6.20~ds1: any revision of it, the newest) or a
// full one (1.6.20~ds1-1+deb12u3: exactly that).
type RuntimePackages struct {
	Containerd string `json:"containerd" yaml:"containerd"`
	// Runc is the distribution's runc; none with Repository, whose
	// containerd.io bundles its own.
	Runc string `json:"runc,omitempty" yaml:"runc"`
	// Repository is Docker's apt repository (or a mirror of it): the
	// distributions ship no containerd 2.x a Kubernetes v1.36 kubelet
	// needs, and Docker's containerd.io is what its users install.
	Repository *RuntimeRepository `json:"repository,omitempty" yaml:"repository"`
}

// RuntimeRepository is an apt repository in Docker's layout
// (dists/SUITE/COMPONENT), holding containerd.io.
type RuntimeRepository struct {
	// URL is https://download.docker.com/linux/debian (or /ubuntu), or a
	// mirror of it.
	URL string `json:"url" yaml:"url"`
	// Suite is the nodes' release codename (bookworm, noble): Docker
	// builds each release's packages apart.
	Suite string `json:"suite" yaml:"suite"`
	// Component is Docker's channel, stable by default.
	Component string `json:"component,omitempty" yaml:"component"`
	// Keyring is a dearmored OpenPGP keyring on the machine running
	// homelab with the key that signs the repository, uploaded to the
	// nodes. Empty: each node fetches URL/gpg and dearmors it.
	Keyring string `json:"keyring,omitempty" yaml:"keyring"`
}

// Registry sends the nodes' pulls to mirrors, as an air-gapped homelab
// needs: containerd asks the mirror and nothing else for a mirrored
// registry's images.
type Registry struct {
	// Mirror (http(s)://HOST[:PORT]) mirrors every registry the cluster's
	// own images come from (MirroredRegistries).
	Mirror string `json:"mirror,omitempty" yaml:"mirror"`
	// Mirrors are per registry host (ghcr.io: https://ghcr.mirror.lan),
	// over Mirror for those hosts.
	Mirrors map[string]string `json:"mirrors,omitempty" yaml:"mirrors"`
}

type SSH struct {
	User       string `json:"user" yaml:"user"`
	Port       int    `json:"port" yaml:"port"`
	PrivateKey string `json:"privateKey" yaml:"privateKey"`
	KnownHosts string `json:"knownHosts" yaml:"knownHosts"`
}

type Node struct {
	Name      string            `json:"name" yaml:"name"`
	Role      string            `json:"role" yaml:"role"`
	Address   string            `json:"address" yaml:"address"`
	MAC       string            `json:"mac,omitempty" yaml:"mac"`
	Interface string            `json:"interface,omitempty" yaml:"interface"`
	Labels    map[string]string `json:"labels,omitempty" yaml:"labels"`
	// Taints in kubectl's form: key[=value]:Effect.
	Taints []string `json:"taints,omitempty" yaml:"taints"`
	GPUs   *GPUs    `json:"gpus,omitempty" yaml:"gpus"`
}

type GPUs struct {
	Vendor string `json:"vendor" yaml:"vendor"`
	Count  int    `json:"count" yaml:"count"`
	Model  string `json:"model,omitempty" yaml:"model"`
}

// ControlPlanes returns the control-plane nodes in declared order.
func (inv *Inventory) ControlPlanes() []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.Role == RoleControlPlane {
			out = append(out, n)
		}
	}
	return out
}

// Workers returns the worker nodes in declared order.
func (inv *Inventory) Workers() []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.Role == RoleWorker {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node of that name.
func (inv *Inventory) Node(name string) (Node, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// IsControlPlane reports whether the node runs the control plane.
func (n Node) IsControlPlane() bool { return n.Role == RoleControlPlane }

// HasGPUs reports whether the node declares at least one GPU.
func (n Node) HasGPUs() bool { return n.GPUs != nil && n.GPUs.Count > 0 }

// IsEndpointNode reports whether the API endpoint is this node's own
// address (the single-ip layout's endpoint node).
func (inv *Inventory) IsEndpointNode(name string) bool {
	return inv.Cluster.Endpoint.Layout == LayoutSingleIP && inv.Cluster.Endpoint.Node == name
}

// Bootstrap is the control-plane node a new cluster's kubeadm init runs on:
// the single-ip layout's endpoint node (every other node reaches the API
// there), else the first control-plane node listed. Only a brand-new
// cluster cares: an existing one is found wherever it runs.
func (inv *Inventory) Bootstrap() Node {
	cps := inv.ControlPlanes()
	for _, n := range cps {
		if inv.IsEndpointNode(n.Name) {
			return n
		}
	}
	return cps[0]
}

// EndpointHost is where clients reach the API in the declared layout: the
// VIP, the single node's own address, or the DNS name.
func (inv *Inventory) EndpointHost() string {
	e := inv.Cluster.Endpoint
	switch e.Layout {
	case LayoutDNS:
		return e.DNSName
	case LayoutSingleIP:
		if n, ok := inv.Node(e.Node); ok {
			return n.Address
		}
		return ""
	}
	return e.VIP
}

// Endpoint is EndpointHost:port, kubeadm's controlPlaneEndpoint.
func (inv *Inventory) Endpoint() string {
	return net.JoinHostPort(inv.EndpointHost(), strconv.Itoa(inv.Cluster.Endpoint.APIPort()))
}

// APIPort is the port every apiserver listens on and the endpoint serves:
// the declared one, else kubeadm's default. Commands that reach a node's
// apiserver ask here rather than assume 6443, which the user may change.
func (e Endpoint) APIPort() int {
	if e.Port == 0 {
		return DefaultPort
	}
	return e.Port
}

// ReadPrivateKey reads the key file ssh.privateKey names (resolved against
// the inventory when it was loaded); the error names the field.
func (s SSH) ReadPrivateKey() ([]byte, error) {
	key, err := os.ReadFile(s.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("ssh.privateKey: %w", err)
	}
	return key, nil
}
