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
