// Package containerd renders the container runtime's configuration the
// kubelet needs: runc on the kubelet's cgroup driver, kubeadm's pause
// image as the sandbox, the drop-in directory imported, registry mirrors
// read from certs.d. The format follows containerd's major version: 1.x
// reads config version 2; 2.x reads version 3, with the CRI plugin split
// in two and renamed.
//
// This is the most common way a hand-built kubeadm node breaks: Debian's
// and Ubuntu's containerd default runc to cgroupfs while kubeadm tells
// the kubelet systemd, and their packaged config.toml imports nothing.
package containerd

import (
	"bytes"
	"fmt"

	"github.com/BurntSushi/toml"
)

// Paths on the node.
const (
	ConfigPath = "/etc/containerd/config.toml"
	// ConfD holds drop-ins other parts of the product add (the NVIDIA
	// runtime), imported by ConfigPath.
	ConfD = "/etc/containerd/conf.d"
	// CertsD holds one hosts.toml per mirrored registry.
	CertsD = "/etc/containerd/certs.d"
	// Socket is the CRI endpoint kubeadm and the kubelet are given.
	Socket = "unix:///run/containerd/containerd.sock"
	// Unit reads ConfigPath only when it starts.
	Unit = "containerd"
)

// Config is what the product decides of containerd's configuration.
type Config struct {
	// Major is the installed containerd's major version: 1 or 2.
	Major int
	// SandboxImage is the pause image kubeadm expects for the cluster's
	// Kubernetes version (SandboxImage).
	SandboxImage string
	// SystemdCgroup is true when the kubelet's cgroupDriver is systemd:
	// the two must agree, or pods fail to start.
	SystemdCgroup bool
	// RestrictOOMScoreAdj is for a containerd whose root lacks
	// CAP_SYS_RESOURCE (rootless, or a namespace without it): runc then
	// cannot lower a sandbox's OOM score below its parent's.
	RestrictOOMScoreAdj bool
	// Runtimes are runtimes beside runc, by name (the NVIDIA runtime on
	// a GPU node), with the runc-compatible binary each runs. They are
	// part of this file, not drop-ins: containerd 1.x merges an imported
	// file's CRI plugin section over the whole of this one's, so a
	// drop-in adding a runtime wipes the sandbox image and the cgroup
	// driver (TestContainerd1ReplacesTheCRISectionOnImport).
	Runtimes map[string]string
}

type runc struct {
	RuntimeType string      `toml:"runtime_type"`
	Options     runcOptions `toml:"options"`
}

type runcOptions struct {
	SystemdCgroup bool   `toml:"SystemdCgroup"`
	BinaryName    string `toml:"BinaryName,omitempty"`
}

type cni struct {
	BinDir  string `toml:"bin_dir"`
	ConfDir string `toml:"conf_dir"`
}

type registry struct {
	ConfigPath string `toml:"config_path"`
}

// v2 is containerd 1.x's config version 2.
type v2 struct {
	Version int      `toml:"version"`
	Imports []string `toml:"imports"`
	Plugins struct {
		CRI struct {
			SandboxImage        string `toml:"sandbox_image"`
			RestrictOOMScoreAdj bool   `toml:"restrict_oom_score_adj"`
			Containerd          struct {
				DefaultRuntimeName string          `toml:"default_runtime_name"`
				Runtimes           map[string]runc `toml:"runtimes"`
			} `toml:"containerd"`
			CNI      cni      `toml:"cni"`
			Registry registry `toml:"registry"`
		} `toml:"io.containerd.grpc.v1.cri"`
	} `toml:"plugins"`
}

// v3 is containerd 2.x's config version 3: the CRI plugin split into a
// runtime plugin and an images plugin, the sandbox a pinned image. CNI's
// directories are left at their defaults (the same as 1.x's): 2.1 renamed
// bin_dir to bin_dirs, and either spelling would warn on one 2.x.
type v3 struct {
	Version int      `toml:"version"`
	Imports []string `toml:"imports"`
	Plugins struct {
		Images struct {
			PinnedImages struct {
				Sandbox string `toml:"sandbox"`
			} `toml:"pinned_images"`
			Registry registry `toml:"registry"`
		} `toml:"io.containerd.cri.v1.images"`
		Runtime struct {
			RestrictOOMScoreAdj bool `toml:"restrict_oom_score_adj"`
			Containerd          struct {
				DefaultRuntimeName string          `toml:"default_runtime_name"`
				Runtimes           map[string]runc `toml:"runtimes"`
			} `toml:"containerd"`
		} `toml:"io.containerd.cri.v1.runtime"`
	} `toml:"plugins"`
}

const header = "# Rendered by homelab up (cluster.containerRuntime): runc on the kubelet's\n" +
	"# cgroup driver, kubeadm's pause image as the sandbox. Drop-ins go to " + ConfD + ".\n"

// Render renders ConfigPath for c.
func Render(c Config) ([]byte, error) {
	if c.SandboxImage == "" {
		return nil, fmt.Errorf("containerd: no sandbox image")
	}
	runtimes := map[string]runc{"runc": {RuntimeType: "io.containerd.runc.v2", Options: runcOptions{SystemdCgroup: c.SystemdCgroup}}}
	for name, binary := range c.Runtimes {
		if name == "runc" || binary == "" {
			return nil, fmt.Errorf("containerd: runtime %q: a name other than runc and a binary", name)
		}
		runtimes[name] = runc{RuntimeType: "io.containerd.runc.v2", Options: runcOptions{SystemdCgroup: c.SystemdCgroup, BinaryName: binary}}
	}
	imports := []string{ConfD + "/*.toml"}
	var doc any
	switch c.Major {
	case 1:
		var d v2
		d.Version, d.Imports = 2, imports
		cri := &d.Plugins.CRI
		cri.SandboxImage, cri.RestrictOOMScoreAdj = c.SandboxImage, c.RestrictOOMScoreAdj
		cri.Containerd.DefaultRuntimeName, cri.Containerd.Runtimes = "runc", runtimes
		cri.CNI, cri.Registry.ConfigPath = cni{BinDir: "/opt/cni/bin", ConfDir: "/etc/cni/net.d"}, CertsD
		doc = d
	case 2:
		var d v3
		d.Version, d.Imports = 3, imports
		d.Plugins.Images.PinnedImages.Sandbox, d.Plugins.Images.Registry.ConfigPath = c.SandboxImage, CertsD
		rt := &d.Plugins.Runtime
		rt.RestrictOOMScoreAdj = c.RestrictOOMScoreAdj
		rt.Containerd.DefaultRuntimeName, rt.Containerd.Runtimes = "runc", runtimes
		doc = d
	default:
		return nil, fmt.Errorf("containerd %d.x: homelab writes the configuration of containerd 1.x and 2.x", c.Major)
	}
	var b bytes.Buffer
	b.WriteString(header)
	if err := toml.NewEncoder(&b).Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
