package kubeadm

// Our own copy of the kubeadm v1beta4, kubelet v1beta1 and kube-proxy
// v1alpha1 fields we set (as KubeOne does): importing k8s.io/kubernetes would
// drag the whole tree in. Field names and JSON tags follow upstream exactly;
// the real kubeadm validates every rendered file in the tests.

const (
	kubeadmAPIVersion   = "kubeadm.k8s.io/v1beta4"
	kubeletAPIVersion   = "kubelet.config.k8s.io/v1beta1"
	kubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
)

type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Arg is a v1beta4 extra argument: a list, not a map, so order is kept and
// a flag may repeat.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type InitConfiguration struct {
	TypeMeta         `json:",inline"`
	BootstrapTokens  []BootstrapToken `json:"bootstrapTokens,omitempty"`
	NodeRegistration NodeRegistration `json:"nodeRegistration"`
	LocalAPIEndpoint APIEndpoint      `json:"localAPIEndpoint"`
	SkipPhases       []string         `json:"skipPhases,omitempty"`
}

type BootstrapToken struct {
	Token       string   `json:"token"`
	Description string   `json:"description,omitempty"`
	TTL         string   `json:"ttl,omitempty"`
	Usages      []string `json:"usages,omitempty"`
	Groups      []string `json:"groups,omitempty"`
}

type NodeRegistration struct {
	Name                  string   `json:"name"`
	CRISocket             string   `json:"criSocket,omitempty"`
	Taints                []Taint  `json:"taints"`
	KubeletExtraArgs      []Arg    `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       string   `json:"imagePullPolicy,omitempty"`
}

type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type APIEndpoint struct {
	AdvertiseAddress string `json:"advertiseAddress"`
	BindPort         int32  `json:"bindPort"`
}

type ClusterConfiguration struct {
	TypeMeta             `json:",inline"`
	ClusterName          string           `json:"clusterName"`
	KubernetesVersion    string           `json:"kubernetesVersion"`
	ControlPlaneEndpoint string           `json:"controlPlaneEndpoint"`
	CertificatesDir      string           `json:"certificatesDir"`
	Networking           Networking       `json:"networking"`
	Etcd                 Etcd             `json:"etcd"`
	APIServer            APIServer        `json:"apiServer"`
	ControllerManager    ControlPlaneComp `json:"controllerManager"`
	Scheduler            ControlPlaneComp `json:"scheduler"`
	EncryptionAlgorithm  string           `json:"encryptionAlgorithm,omitempty"`
	// CertificateValidityPeriod is every leaf certificate's lifetime
	// (kubeadm's default: a year).
	CertificateValidityPeriod string `json:"certificateValidityPeriod,omitempty"`
}

type Networking struct {
	ServiceSubnet string `json:"serviceSubnet"`
	PodSubnet     string `json:"podSubnet"`
	DNSDomain     string `json:"dnsDomain"`
}

type Etcd struct {
	Local *LocalEtcd `json:"local"`
}

type LocalEtcd struct {
	DataDir        string   `json:"dataDir"`
	ExtraArgs      []Arg    `json:"extraArgs,omitempty"`
	ServerCertSANs []string `json:"serverCertSANs"`
	PeerCertSANs   []string `json:"peerCertSANs"`
}

type APIServer struct {
	ControlPlaneComp `json:",inline"`
	CertSANs         []string `json:"certSANs"`
}

type ControlPlaneComp struct {
	ExtraArgs    []Arg         `json:"extraArgs,omitempty"`
	ExtraVolumes []HostPathMnt `json:"extraVolumes,omitempty"`
}

type HostPathMnt struct {
	Name      string `json:"name"`
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	PathType  string `json:"pathType,omitempty"`
}

type JoinConfiguration struct {
	TypeMeta         `json:",inline"`
	NodeRegistration NodeRegistration  `json:"nodeRegistration"`
	CACertPath       string            `json:"caCertPath,omitempty"`
	Discovery        Discovery         `json:"discovery"`
	ControlPlane     *JoinControlPlane `json:"controlPlane,omitempty"`
	SkipPhases       []string          `json:"skipPhases,omitempty"`
}

type Discovery struct {
	BootstrapToken    *BootstrapTokenDiscovery `json:"bootstrapToken,omitempty"`
	File              *FileDiscovery           `json:"file,omitempty"`
	TLSBootstrapToken string                   `json:"tlsBootstrapToken"`
}

type FileDiscovery struct {
	KubeConfigPath string `json:"kubeConfigPath"`
}

type BootstrapTokenDiscovery struct {
	Token                    string   `json:"token"`
	APIServerEndpoint        string   `json:"apiServerEndpoint"`
	CACertHashes             []string `json:"caCertHashes"`
	UnsafeSkipCAVerification bool     `json:"unsafeSkipCAVerification"`
}

type JoinControlPlane struct {
	LocalAPIEndpoint APIEndpoint `json:"localAPIEndpoint"`
}

type KubeletConfiguration struct {
	TypeMeta           `json:",inline"`
	CgroupDriver       string   `json:"cgroupDriver"`
	ClusterDomain      string   `json:"clusterDomain"`
	ClusterDNS         []string `json:"clusterDNS"`
	RotateCertificates bool     `json:"rotateCertificates"`
	ServerTLSBootstrap bool     `json:"serverTLSBootstrap"`
	// FailCgroupV1 false lets the kubelet run on a cgroup v1 host (from
	// v1.35 it refuses to by default); nil leaves the kubelet's default.
	FailCgroupV1 *bool `json:"failCgroupV1,omitempty"`
}

type KubeProxyConfiguration struct {
	TypeMeta    `json:",inline"`
	Mode        string                           `json:"mode"`
	ClusterCIDR string                           `json:"clusterCIDR"`
	Conntrack   *KubeProxyConntrackConfiguration `json:"conntrack,omitempty"`
}

type KubeProxyConntrackConfiguration struct {
	// MaxPerCore 0 leaves nf_conntrack_max as it is.
	MaxPerCore *int32 `json:"maxPerCore"`
}
