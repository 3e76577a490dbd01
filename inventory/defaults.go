package inventory

import "strings"

// Defaults for fields users may leave out.
const (
	DefaultKubernetesVersion = "v1.34.4"
	DefaultPort              = 6443
	DefaultRouterID          = 51
	DefaultAdvertIntervalMs  = 400
	DefaultPodCIDR           = "10.244.0.0/16"
	DefaultServiceCIDR       = "10.96.0.0/12"
	DefaultDNSDomain         = "cluster.local"
	DefaultCRISocket         = "unix:///run/containerd/containerd.sock"
	DefaultInterface         = "eth0"
	DefaultKubeProxyMode     = "iptables"
	// DefaultToolkitVersion is the NVIDIA Container Toolkit release pinned on
	// GPU workers (apt version: upstream version and Debian revision).
	DefaultToolkitVersion = "1.20.0-1"
	// DefaultDevicePluginVersion is NVIDIA's k8s-device-plugin image tag.
	DefaultDevicePluginVersion = "v0.20.1"
	// DefaultPackagesRepository is the Kubernetes project's own apt
	// repository, one per minor, as kubeadm's install guide names it.
	DefaultPackagesRepository = "https://pkgs.k8s.io" + PackagesPath
	// PackagesPath is where pkgs.k8s.io keeps a minor's repository (a
	// mirror of it, the emulated homelab's, keeps the same paths).
	PackagesPath = "/core:/stable:/" + MinorPlaceholder + "/deb/"
	// MinorPlaceholder in cluster.packages.repository stands for the
	// cluster's minor, e.g. v1.34.
	MinorPlaceholder = "{minor}"
)

// ApplyDefaults fills what the user left out. It never overrides a value
// the user set, so validation reports the user's own mistakes.
func (inv *Inventory) ApplyDefaults() {
	c := &inv.Cluster
	setString(&c.Name, "homelab")
	setString(&c.KubernetesVersion, DefaultKubernetesVersion)
	if c.Endpoint.Layout == "" {
		switch {
		case c.Endpoint.VIP != "":
			c.Endpoint.Layout = LayoutVIP
		case c.Endpoint.DNSName != "":
			c.Endpoint.Layout = LayoutDNS
		default:
			c.Endpoint.Layout = LayoutVIP
		}
	}
	if c.Endpoint.Port == 0 {
		c.Endpoint.Port = DefaultPort
	}
	if c.Endpoint.Node == "" {
		if cps := inv.ControlPlanes(); len(cps) > 0 {
			c.Endpoint.Node = cps[0].Name
		}
	}
	if c.VRRP.RouterID == 0 {
		c.VRRP.RouterID = DefaultRouterID
	}
	if c.VRRP.AdvertIntervalMs == 0 {
		c.VRRP.AdvertIntervalMs = DefaultAdvertIntervalMs
	}
	setString(&c.Network.PodCIDR, DefaultPodCIDR)
	setString(&c.Network.ServiceCIDR, DefaultServiceCIDR)
	setString(&c.Network.DNSDomain, DefaultDNSDomain)
	if len(c.Network.Nameservers) == 0 && c.Network.Gateway != "" {
		c.Network.Nameservers = []string{c.Network.Gateway}
	}
	setString(&c.KubeProxy.Replacement, ReplacementNone)
	setString(&c.KubeProxy.Mode, DefaultKubeProxyMode)
	setString(&c.CNI, CNICilium)
	setString(&c.CRISocket, DefaultCRISocket)
	setString(&c.GPU.ToolkitVersion, DefaultToolkitVersion)
	setString(&c.GPU.DevicePlugin.Version, DefaultDevicePluginVersion)
	setString(&c.Packages.Repository, DefaultPackagesRepository)
	if r := c.ContainerRuntime.RuntimeRepository(); r != nil {
		setString(&r.Component, "stable")
	}
	setString(&c.Certificates.ValidityPeriod, DefaultCertificateValidity)
	setString(&c.Certificates.RenewBefore, DefaultRenewBefore)
	if c.Upgrade.MaxUnavailable == 0 {
		c.Upgrade.MaxUnavailable = DefaultUpgradeMaxUnavailable
	}
	setString(&c.Upgrade.DrainTimeout, DefaultDrainTimeout)
	if sn := c.Etcd.Snapshots; sn != nil {
		setString(&sn.Schedule, DefaultSnapshotSchedule)
		if sn.Keep == 0 {
			sn.Keep = DefaultSnapshotKeep
		}
		if s3 := sn.S3; s3 != nil {
			setString(&s3.Region, DefaultS3Region)
			setString(&s3.Credentials.Profile, DefaultS3Profile)
			setString(&s3.Rclone, DefaultRclone)
			switch {
			case s3.Prefix == "":
				s3.Prefix = defaultS3Prefix(c.Name)
			case !strings.HasSuffix(s3.Prefix, "/"):
				s3.Prefix += "/" // a folder, as rclone and the S3 consoles show it
			}
		}
	}

	setString(&inv.SSH.User, "root")
	if inv.SSH.Port == 0 {
		inv.SSH.Port = 22
	}
	setString(&inv.SSH.PrivateKey, "~/.ssh/id_ed25519")
	setString(&inv.SSH.KnownHosts, "~/.ssh/known_hosts")

	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		setString(&n.Interface, DefaultInterface)
		if n.GPUs != nil && n.GPUs.Count == 0 {
			n.GPUs.Count = 1
		}
	}
}

// VRRPInterface is the interface keepalived binds on the node: the cluster's
// VRRP interface when set, else the node's own.
func (inv *Inventory) VRRPInterface(n Node) string {
	if inv.Cluster.VRRP.Interface != "" {
		return inv.Cluster.VRRP.Interface
	}
	return n.Interface
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}
