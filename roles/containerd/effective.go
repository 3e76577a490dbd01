package containerd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Effective is what a node's containerd runs pods with, read from
// `containerd config dump` (its configuration with defaults and imports
// merged) and `containerd --version`: what doctor compares with the
// kubelet's.
type Effective struct {
	// Version is containerd's own (1.6.20~ds1, v2.0.0), Major its major.
	Version string
	Major   int
	// Runtime is the CRI plugin's default runtime; SystemdCgroup its
	// cgroup driver (false: cgroupfs, what the packages default to).
	Runtime       string
	SystemdCgroup bool
	SandboxImage  string
	// RegistryConfigPath is where containerd reads mirrors' hosts.toml
	// from; "" when it reads none (the packages' default).
	RegistryConfigPath string
	// Runtimes are the CRI runtime handlers (what a RuntimeClass names)
	// with the binary each runs ("" for runc's own).
	Runtimes map[string]string
}

// ParseVersion reads `containerd --version`: "containerd PACKAGE VERSION
// REVISION", whoever built it (Debian, containerd.io, upstream).
func ParseVersion(out string) (version string, major int, err error) {
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "containerd" {
		return "", 0, fmt.Errorf("containerd --version: unexpected %q", strings.TrimSpace(out))
	}
	version = f[2]
	if major, err = Major(version); err != nil {
		return "", 0, fmt.Errorf("containerd --version: %w", err)
	}
	return version, major, nil
}

// Major is the major of a containerd release as its builders write it
// (1.6.20~ds1, v2.1.4, 2.2.9+unknown): the one fact that decides the
// configuration's format.
func Major(version string) (int, error) {
	m, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	major, err := strconv.Atoi(m)
	if err != nil {
		return 0, fmt.Errorf("version %q has no major", version)
	}
	return major, nil
}

type dumpRegistry struct {
	ConfigPath string `toml:"config_path"`
}

type dumpRuntimes struct {
	DefaultRuntimeName string `toml:"default_runtime_name"`
	Runtimes           map[string]struct {
		Options map[string]any `toml:"options"`
	} `toml:"runtimes"`
}

// binaries are each runtime's BinaryName ("" when it runs runc itself).
func (d dumpRuntimes) binaries() map[string]string {
	out := map[string]string{}
	for name, r := range d.Runtimes {
		b, _ := r.Options["BinaryName"].(string)
		out[name] = b
	}
	return out
}

// configDump is the part of both config versions ParseDump reads: version 2
// (containerd 1.x) has one CRI plugin; version 3 (2.x) splits it into a
// runtime plugin and an images plugin holding the sandbox as a pinned
// image.
type configDump struct {
	Version int `toml:"version"`
	Plugins struct {
		CRI struct {
			SandboxImage string       `toml:"sandbox_image"`
			Containerd   dumpRuntimes `toml:"containerd"`
			Registry     dumpRegistry `toml:"registry"`
		} `toml:"io.containerd.grpc.v1.cri"`
		Runtime struct {
			Containerd dumpRuntimes `toml:"containerd"`
		} `toml:"io.containerd.cri.v1.runtime"`
		Images struct {
			PinnedImages struct {
				Sandbox string `toml:"sandbox"`
			} `toml:"pinned_images"`
			Registry dumpRegistry `toml:"registry"`
		} `toml:"io.containerd.cri.v1.images"`
	} `toml:"plugins"`
}

// ParseDump reads `containerd config dump` into e (its version fields
// left as they are).
func ParseDump(data []byte, e *Effective) error {
	var d configDump
	if _, err := toml.Decode(string(data), &d); err != nil {
		return fmt.Errorf("containerd config dump: %w", err)
	}
	rt := d.Plugins.CRI.Containerd
	e.SandboxImage = d.Plugins.CRI.SandboxImage
	e.RegistryConfigPath = d.Plugins.CRI.Registry.ConfigPath
	switch d.Version {
	case 2:
	case 3:
		rt = d.Plugins.Runtime.Containerd
		e.SandboxImage = d.Plugins.Images.PinnedImages.Sandbox
		e.RegistryConfigPath = d.Plugins.Images.Registry.ConfigPath
	default:
		return fmt.Errorf("containerd config dump: config version %d (containerd 1.x writes 2, 2.x 3)", d.Version)
	}
	e.Runtime, e.Runtimes = rt.DefaultRuntimeName, rt.binaries()
	r, ok := rt.Runtimes[e.Runtime]
	if e.Runtime == "" || !ok {
		return fmt.Errorf("containerd config dump: the default runtime %q is not configured", e.Runtime)
	}
	e.SystemdCgroup = r.Options["SystemdCgroup"] == true
	return nil
}

// CgroupDriver is the kubelet's name for the runtime's cgroup driver.
func (e Effective) CgroupDriver() string {
	if e.SystemdCgroup {
		return "systemd"
	}
	return "cgroupfs"
}
