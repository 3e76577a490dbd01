// Package kubepkg is how a node gets kubeadm, kubelet and kubectl when
// homelab manages them (cluster.packages.manage): the Kubernetes apt
// repository for the cluster's minor, set up as kubeadm's install guide
// does it (the repository's key dearmored into a keyring of its own, a
// sources list trusting that keyring only), and the three packages at the
// declared patch, held there. It is the one home of those names and paths.
package kubepkg

import (
	"strings"

	"github.com/homelab-dev/homelab/inventory"
)

// Node paths, as kubeadm's install guide names them.
const (
	// KeyringPath is where the repository's dearmored key lands.
	KeyringPath = "/etc/apt/keyrings/kubernetes-apt-keyring.gpg"
	// SourcesPath is the repository's sources list.
	SourcesPath = "/etc/apt/sources.list.d/kubernetes.list"
	// KeyFile is the repository's ASCII-armoured key, beside its index.
	KeyFile = "Release.key"
	// KubeletUnit is enabled once installed, as kubeadm's install guide
	// does: kubeadm starts the kubelet but never enables it.
	KubeletUnit = "kubelet"
)

// Packages are installed together at one version on every node, the three
// kubeadm's install guide installs and holds. What they depend on
// (cri-tools, kubernetes-cni, ...) is left to apt.
var Packages = []string{"kubeadm", "kubelet", "kubectl"}

// Install is what a node's Kubernetes Package resource installs.
type Install struct {
	Packages []string
	// Version is the upstream version (1.34.4): pkgs.k8s.io's Debian
	// revisions (1.34.4-1.1, a rebuild's 1.34.4-2.1) are the
	// repository's business, and any of them is the declared patch.
	Version string
	// Repository is the flat repository's URL for the cluster's minor.
	Repository string
	// KeyURL is fetched when Key is empty; Key is the dearmored keyring
	// cluster.packages.keyring holds, uploaded as is.
	KeyURL      string
	Key         []byte
	Keyring     string
	SourcesPath string
	Sources     []byte
}

// UpstreamVersion is a Kubernetes version as Debian packages spell it:
// v1.34.4 -> 1.34.4.
func UpstreamVersion(kubernetesVersion string) string {
	return strings.TrimPrefix(kubernetesVersion, "v")
}

// Sources renders the sources list of a flat repository (suite "/").
func Sources(repository string) []byte {
	return []byte("# Rendered by homelab: the Kubernetes packages' repository (cluster.packages).\n" +
		"deb [signed-by=" + KeyringPath + "] " + repository + " /\n")
}

// For returns the install every node gets, and false when the user
// installs the packages (cluster.packages.manage is false). key is the
// keyring cluster.packages.keyring names, read by the caller (nil when it
// is unset: the node fetches the repository's key).
func For(inv *inventory.Inventory, key []byte) (Install, bool) {
	c := inv.Cluster
	if !c.Packages.Manage {
		return Install{}, false
	}
	repo := c.PackagesRepository()
	in := Install{
		Packages:    append([]string(nil), Packages...),
		Version:     UpstreamVersion(c.KubernetesVersion),
		Repository:  repo,
		Keyring:     KeyringPath,
		SourcesPath: SourcesPath,
		Sources:     Sources(repo),
	}
	if len(key) > 0 {
		in.Key = append([]byte(nil), key...)
	} else {
		in.KeyURL = repo + KeyFile
	}
	return in, true
}
