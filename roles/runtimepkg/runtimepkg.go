// Package runtimepkg is how a node gets its container runtime when homelab
// installs it (cluster.containerRuntime.packages): the distribution's
// containerd and runc from the node's own apt sources, or Docker's
// containerd.io (which bundles runc) from Docker's repository set up as
// Docker's install guide does it: its key dearmored into a keyring of its
// own, a sources list trusting that keyring only. Either way at the pinned
// versions, held there. It is the one home of those names and paths.
package runtimepkg

import (
	"strings"

	"github.com/homelab-dev/homelab/inventory"
)

// Node paths for Docker's repository.
const (
	KeyringPath = "/etc/apt/keyrings/docker.gpg"
	SourcesPath = "/etc/apt/sources.list.d/docker.list"
	// KeyFile is the repository's ASCII-armoured key, at its top.
	KeyFile = "gpg"
	// DockerPackage is Docker's containerd, runc inside: it conflicts
	// with the distribution's containerd and runc, which apt removes.
	DockerPackage = "containerd.io"
)

// Package is one apt package at its pin.
type Package struct {
	Name, Version string
	// AnyRevision: Version is an upstream version, any Debian revision
	// of it the pin (the repository's newest).
	AnyRevision bool
	// Replaces are the packages it takes the place of, which apt must
	// be free to remove (unheld).
	Replaces []string
}

// Repository is where the packages come from, when not the node's own
// sources.
type Repository struct {
	// KeyURL is fetched when Key is empty; Key is the dearmored keyring
	// the inventory names, uploaded as is.
	KeyURL      string
	Key         []byte
	Keyring     string
	SourcesPath string
	Sources     []byte
}

// Install is what a node's runtime Packages install, in order (runc before
// the containerd that runs it).
type Install struct {
	Packages   []Package
	Repository *Repository
}

// Sources renders the sources list of Docker's layout (suite and
// component under dists/).
func Sources(r inventory.RuntimeRepository) []byte {
	return []byte("# Rendered by homelab: the container runtime's repository (cluster.containerRuntime.packages).\n" +
		"deb [signed-by=" + KeyringPath + "] " + r.URL + " " + r.Suite + " " + r.Component + "\n")
}

// For returns what every node installs, and false when the inventory pins
// no runtime packages. key is the keyring the repository's keyring field
// names, read by the caller (nil when unset: the node fetches the
// repository's key).
func For(inv *inventory.Inventory, key []byte) (Install, bool) {
	rt := inv.Cluster.ContainerRuntime
	if !rt.Manage || rt.Packages == nil {
		return Install{}, false
	}
	pin := func(name, version string) Package {
		return Package{Name: name, Version: version, AnyRevision: inventory.UpstreamVersion(version) == version}
	}
	r := rt.Packages.Repository
	if r == nil {
		return Install{Packages: []Package{pin("runc", rt.Packages.Runc), pin("containerd", rt.Packages.Containerd)}}, true
	}
	repo := &Repository{Keyring: KeyringPath, SourcesPath: SourcesPath, Sources: Sources(*r)}
	if len(key) > 0 {
		repo.Key = append([]byte(nil), key...)
	} else {
		repo.KeyURL = strings.TrimRight(r.URL, "/") + "/" + KeyFile
	}
	dockerPkg := pin(DockerPackage, rt.Packages.Containerd)
	dockerPkg.Replaces = []string{"containerd", "runc"}
	return Install{Packages: []Package{dockerPkg}, Repository: repo}, true
}
