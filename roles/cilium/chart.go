package cilium

// The official chart, pinned: an upgrade of Cilium is a deliberate change
// of this version (or of the archive in cluster.cilium.chart), never
// whatever the repository serves that day.
const (
	ChartRepo    = "https://helm.cilium.io"
	ChartName    = "cilium"
	ChartVersion = "1.18.4"
	// Release and Namespace are where Cilium's own docs install it, so
	// `helm -n kube-system list` and cilium-cli find it.
	Release   = "cilium"
	Namespace = "kube-system"
)

// What Cilium's chart creates that homelab waits for and reads: the agent
// DaemonSet (one pod per node, labelled k8s-app=cilium), whose pods write
// the CNI configuration ConfigFile into /etc/cni/net.d, and the agents'
// ConfigMap.
const (
	AgentDaemonSet = "cilium"
	AgentLabel     = "k8s-app=cilium"
	ConfigMap      = "cilium-config"
	ConfigFile     = "05-cilium.conflist"
)
