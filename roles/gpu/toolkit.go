package gpu

import (
	"github.com/homelab-dev/homelab/inventory"
)

// NVIDIA's apt repository for the container toolkit, as NVIDIA's install
// guide sets it up: the repository key dearmored into a keyring of its own,
// and a sources list that trusts that keyring only (signed-by), so the key
// vouches for nothing else on the node.
const (
	// ToolkitKeyURL is NVIDIA's ASCII-armoured repository key.
	ToolkitKeyURL = "https://nvidia.github.io/libnvidia-container/gpgkey"
	// ToolkitKeyring is where the dearmored key lands.
	ToolkitKeyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
	// ToolkitSourcesPath is the repository's sources list.
	ToolkitSourcesPath = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
	// ToolkitRepository is the stable channel; apt fills in $(ARCH).
	ToolkitRepository = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
)

// ToolkitPackages are installed together at one version: NVIDIA's guide
// pins all four, since nvidia-container-toolkit only asks for ">=" of the
// libraries and apt would otherwise pull the newest ones.
var ToolkitPackages = []string{
	"nvidia-container-toolkit",
	"nvidia-container-toolkit-base",
	"libnvidia-container-tools",
	"libnvidia-container1",
}

// ToolkitSources renders the sources list.
func ToolkitSources() []byte {
	return []byte("# Rendered by homelab: NVIDIA's container toolkit repository (GPU nodes).\n" +
		"deb [signed-by=" + ToolkitKeyring + "] " + ToolkitRepository + " /\n")
}

// Toolkit is what a GPU worker's Package resource installs.
type Toolkit struct {
	Packages    []string
	Version     string
	KeyURL      string
	Keyring     string
	SourcesPath string
	Sources     []byte
}

// ToolkitFor returns the toolkit install for a node, and false for a node
// that gets none (no NVIDIA GPU declared).
func ToolkitFor(inv *inventory.Inventory, node inventory.Node) (Toolkit, bool) {
	if !IsNvidia(node) {
		return Toolkit{}, false
	}
	return Toolkit{
		Packages:    append([]string(nil), ToolkitPackages...),
		Version:     inv.Cluster.GPU.ToolkitVersion,
		KeyURL:      ToolkitKeyURL,
		Keyring:     ToolkitKeyring,
		SourcesPath: ToolkitSourcesPath,
		Sources:     ToolkitSources(),
	}, true
}
