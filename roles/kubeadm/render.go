// Package kubeadm renders kubeadm's configuration for each node: typed
// structs marshalled with sigs.k8s.io/yaml, so a field typo is a compile
// error and the output is stable byte for byte.
package kubeadm

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/sans"
)

// Paths on the node.
const (
	InitConfigPath = "/etc/kubernetes/kubeadm/init.yaml"
	// JoinConfigPath holds the node's bootstrap token: it exists on the
	// node only while its join runs.
	JoinConfigPath = "/etc/kubernetes/kubeadm/join.yaml"
	// DiscoveryPath is the kubeconfig joins discover the cluster from: the
	// endpoint and the bundle's CA, no credentials.
	DiscoveryPath     = "/etc/kubernetes/kubeadm/discovery.conf"
	EncryptionDir     = "/etc/kubernetes/encryption"
	EncryptionConfig  = EncryptionDir + "/config.yaml"
	kubeProxyPhase    = "addon/kube-proxy"
	controlPlaneTaint = "node-role.kubernetes.io/control-plane"
	// BootstrapGroup is the group kubeadm's RBAC lets bootstrap tokens
	// join with (CSR creation and auto-approval).
	BootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"
)

// Init renders a control-plane node's init config: InitConfiguration,
// ClusterConfiguration, KubeletConfiguration and, while kube-proxy runs,
// KubeProxyConfiguration. Every control-plane node gets one: any of them
// may bootstrap a new cluster, and the init phases that regenerate a
// node's certificates and manifests read it. It holds no token: kubeadm
// init mints one, which the provisioner deletes once init is done, and
// each join brings its own.
func Init(inv *inventory.Inventory, node inventory.Node, apiSANs, etcdSANs sans.Set) ([]byte, error) {
	init := InitConfiguration{
		TypeMeta:         TypeMeta{kubeadmAPIVersion, "InitConfiguration"},
		NodeRegistration: registration(inv, node),
		LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: node.Address, BindPort: int32(inv.Cluster.Endpoint.Port)},
	}
	if inv.Cluster.KubeProxy.Replacement == inventory.ReplacementCilium {
		init.SkipPhases = []string{kubeProxyPhase}
	}
	docs := []any{init, Cluster(inv, apiSANs, etcdSANs), kubelet(inv)}
	if inv.Cluster.KubeProxy.Replacement == inventory.ReplacementNone {
		docs = append(docs, KubeProxy(inv))
	}
	return marshalDocs(docs...)
}

// Join renders a joining node's JoinConfiguration with the node's own
// bootstrap token; control-plane nodes join as control-plane members. The
// cluster is discovered from DiscoveryPath, which carries the bundle's CA:
// no cluster-info signature to wait for, and the CA is never skipped.
func Join(inv *inventory.Inventory, node inventory.Node, token string) ([]byte, error) {
	join := JoinConfiguration{
		TypeMeta:         TypeMeta{kubeadmAPIVersion, "JoinConfiguration"},
		NodeRegistration: registration(inv, node),
		CACertPath:       nodefacts.CACert,
		Discovery: Discovery{
			File:              &FileDiscovery{KubeConfigPath: DiscoveryPath},
			TLSBootstrapToken: token,
		},
	}
	if node.IsControlPlane() {
		join.ControlPlane = &JoinControlPlane{
			LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: node.Address, BindPort: int32(inv.Cluster.Endpoint.Port)},
		}
	}
	return marshalDocs(join)
}

// Cluster renders the ClusterConfiguration shared by every control-plane
// node (kubeadm stores it in the kubeadm-config ConfigMap at init).
func Cluster(inv *inventory.Inventory, apiSANs, etcdSANs sans.Set) ClusterConfiguration {
	c := inv.Cluster
	// Metrics and health endpoints stay on loopback: nothing off the
	// node needs them, and the VIP must never reach them. Profiling is
	// off on every component (CIS 1.2.x, 1.3.2, 1.4.1): /debug/pprof
	// serves any authenticated user a CPU or heap profile on demand,
	// which no homelab needs running.
	noProfiling := Arg{Name: "profiling", Value: "false"}
	authnArgs, authnVolumes := authenticationArgs(c.KubernetesVersion)
	loopback := []Arg{{Name: "bind-address", Value: "127.0.0.1"}, noProfiling}
	// The API server verifies the kubelets it reaches (logs, exec,
	// port-forward) against the cluster CA, which signs their serving
	// certificates (serverTLSBootstrap); without it, whatever answers at a
	// node's address is believed.
	kubeletCA := Arg{Name: "kubelet-certificate-authority", Value: nodefacts.CACert}
	return ClusterConfiguration{
		TypeMeta:             TypeMeta{kubeadmAPIVersion, "ClusterConfiguration"},
		ClusterName:          c.Name,
		KubernetesVersion:    c.KubernetesVersion,
		ControlPlaneEndpoint: inv.Endpoint(),
		CertificatesDir:      nodefacts.PKIDir,
		Networking: Networking{
			ServiceSubnet: c.Network.ServiceCIDR,
			PodSubnet:     c.Network.PodCIDR,
			DNSDomain:     c.Network.DNSDomain,
		},
		Etcd: Etcd{Local: &LocalEtcd{
			DataDir:        nodefacts.EtcdDataDir,
			ServerCertSANs: etcdSANs.Strings(),
			PeerCertSANs:   etcdSANs.Strings(),
		}},
		APIServer: APIServer{
			ControlPlaneComp: ControlPlaneComp{
				ExtraArgs: slices.Concat([]Arg{{Name: "encryption-provider-config", Value: EncryptionConfig}, noProfiling, kubeletCA}, auditArgs, authnArgs),
				ExtraVolumes: slices.Concat([]HostPathMnt{{
					Name: "encryption-config", HostPath: EncryptionDir, MountPath: EncryptionDir,
					ReadOnly: true, PathType: "DirectoryOrCreate",
				}}, auditVolumes, authnVolumes),
			},
			CertSANs: apiSANs.Strings(),
		},
		ControllerManager:         ControlPlaneComp{ExtraArgs: loopback},
		Scheduler:                 ControlPlaneComp{ExtraArgs: loopback},
		CertificateValidityPeriod: certificateValidity(c.Certificates),
	}
}

// certificateValidity is kubeadm's certificateValidityPeriod, left out at
// kubeadm's own default so that a cluster built before the field existed
// sees no change.
func certificateValidity(c inventory.Certificates) string {
	if c.ValidityPeriod == "" || c.ValidityPeriod == inventory.DefaultCertificateValidity {
		return ""
	}
	return c.Validity().String()
}

// KubeProxy renders kube-proxy's configuration (only while kube-proxy runs).
func KubeProxy(inv *inventory.Inventory) KubeProxyConfiguration {
	k := KubeProxyConfiguration{
		TypeMeta:    TypeMeta{kubeProxyAPIVersion, "KubeProxyConfiguration"},
		Mode:        inv.Cluster.KubeProxy.Mode,
		ClusterCIDR: inv.Cluster.Network.PodCIDR,
	}
	if m := inv.Cluster.KubeProxy.ConntrackMaxPerCore; m != nil {
		k.Conntrack = &KubeProxyConntrackConfiguration{MaxPerCore: m}
	}
	return k
}

func kubelet(inv *inventory.Inventory) KubeletConfiguration {
	k := KubeletConfiguration{
		TypeMeta:           TypeMeta{kubeletAPIVersion, "KubeletConfiguration"},
		CgroupDriver:       CgroupDriver,
		ClusterDomain:      inv.Cluster.Network.DNSDomain,
		ClusterDNS:         []string{clusterDNS(inv.Cluster.Network.ServiceCIDR)},
		RotateCertificates: true,
		// The kubelet asks the cluster CA for its serving certificate
		// instead of signing its own, so the API server (and
		// metrics-server) can verify whom it reaches at port 10250; up
		// approves the request after checking its names
		// (infra/servingcert).
		ServerTLSBootstrap: true,
	}
	if inv.Cluster.AllowCgroupV1 {
		k.FailCgroupV1 = new(bool)
	}
	return k
}

// clusterDNS is the tenth service address, where kubeadm puts CoreDNS.
func clusterDNS(serviceCIDR string) string {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return ""
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// registration pins the node's name and its own address as the kubelet's
// node IP, so a VIP held by the node never becomes its InternalIP.
func registration(inv *inventory.Inventory, node inventory.Node) NodeRegistration {
	args := []Arg{{Name: "node-ip", Value: node.Address}}
	if labels := KubeletLabels(node); len(labels) > 0 {
		args = append(args, Arg{Name: "node-labels", Value: strings.Join(labels, ",")})
	}
	return NodeRegistration{
		Name:             node.Name,
		CRISocket:        inv.Cluster.CRISocket,
		Taints:           Taints(node),
		KubeletExtraArgs: args,
		ImagePullPolicy:  "IfNotPresent",
	}
}

// GPU role defaults.
const (
	GPUPresentLabel = "nvidia.com/gpu.present"
	GPUTaintKey     = "nvidia.com/gpu"
)

// Labels returns every label the node should carry, sorted: the
// inventory's plus the GPU label for GPU nodes.
func Labels(node inventory.Node) map[string]string {
	out := map[string]string{}
	if node.HasGPUs() {
		out[GPUPresentLabel] = "true"
	}
	for k, v := range node.Labels {
		out[k] = v
	}
	return out
}

// KubeletLabels are the labels the kubelet may set itself at registration
// (k=v, sorted). The NodeRestriction admission plugin forbids kubelets to
// set most kubernetes.io and k8s.io labels; those are applied through the
// API by the provisioner instead.
func KubeletLabels(node inventory.Node) []string {
	var out []string
	for k, v := range Labels(node) {
		if restrictedLabel(k) {
			continue
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func restrictedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return !strings.HasPrefix(prefix, "kubelet.") && !strings.HasPrefix(prefix, "node.")
		}
	}
	return false
}

// Taints returns the node's taints: the control-plane taint on control-plane
// nodes (kubeadm's default, kept explicit since setting any taint replaces
// the default), the GPU taint on GPU workers unless the inventory sets its
// own taint of that key, then the inventory's.
func Taints(node inventory.Node) []Taint {
	out := []Taint{}
	declared := map[string]bool{}
	var own []Taint
	for _, s := range node.Taints {
		t, err := inventory.ParseTaint(s)
		if err != nil {
			continue // validation reported it
		}
		declared[t.Key] = true
		own = append(own, Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	if node.IsControlPlane() && !declared[controlPlaneTaint] {
		out = append(out, Taint{Key: controlPlaneTaint, Effect: "NoSchedule"})
	}
	if node.HasGPUs() && !node.IsControlPlane() && !declared[GPUTaintKey] {
		out = append(out, Taint{Key: GPUTaintKey, Value: "present", Effect: "NoSchedule"})
	}
	return append(out, own...)
}

func marshalDocs(docs ...any) ([]byte, error) {
	var buf bytes.Buffer
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("marshalling %T: %w", d, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// ComponentArgs are the flags the cluster config gives each control-plane
// component, as name=value by static pod name: what a node's manifests must
// carry. kubeadm writes them at init and join only, so a cluster built
// before a flag was declared (an adopted one, or an older config) lacks it
// until its manifests are regenerated.
func ComponentArgs(cc ClusterConfiguration) map[string][]string {
	flags := func(args []Arg) []string {
		var out []string
		for _, a := range args {
			out = append(out, a.Name+"="+a.Value)
		}
		return out
	}
	out := map[string][]string{}
	for name, args := range map[string][]Arg{
		nodefacts.KubeAPIServer:         cc.APIServer.ExtraArgs,
		nodefacts.KubeControllerManager: cc.ControllerManager.ExtraArgs,
		nodefacts.KubeScheduler:         cc.Scheduler.ExtraArgs,
	} {
		if len(args) > 0 {
			out[name] = flags(args)
		}
	}
	return out
}

// DiscoveryConfig renders the kubeconfig joins discover the cluster from: the
// endpoint and the cluster's CA, no credentials (each join authenticates
// with its own bootstrap token).
func DiscoveryConfig(inv *inventory.Inventory, caPEM []byte) ([]byte, error) {
	name := inv.Cluster.Name
	cfg := clientcmdv1.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    name,
			Cluster: clientcmdv1.Cluster{Server: "https://" + inv.Endpoint(), CertificateAuthorityData: caPEM},
		}},
		// kubeadm validates the file as a kubeconfig, which wants a user:
		// one without credentials, so discovery reads cluster-info
		// anonymously and the join authenticates with its token.
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: "discovery"}},
		Contexts:       []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{Cluster: name, AuthInfo: "discovery"}}},
		CurrentContext: name,
	}
	return yaml.Marshal(cfg)
}
