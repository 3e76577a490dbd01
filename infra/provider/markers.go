package provider

// InitMarker and JoinMarker are the files KubeadmInit and KubeadmJoin
// write once kubeadm returned success. Without its marker a node holding
// kubeadm's files counts as an interrupted run and is reset before its
// init or join: `homelab adopt` writes them on the nodes of a cluster
// kubeadm built by hand, after checking each node is fully set up.
const (
	InitMarker = initMarker
	JoinMarker = joinMarker
)

// CompletionFiles are the files whose presence, marker included, makes a
// node count as set up: the first control-plane node's init, another
// control-plane node's join, a worker's join (KubeadmInit and KubeadmJoin
// read their state this way).
func CompletionFiles(first, controlPlane bool) []string {
	if first {
		return append([]string(nil), initComplete...)
	}
	return KubeadmJoinArgs{ControlPlane: controlPlane}.complete()
}
