package cri

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/BurntSushi/toml"

	"github.com/homelab-dev/homelab/infra/cniconf"
)

// DefaultConfigPath is containerd's main configuration file.
const DefaultConfigPath = "/etc/containerd/config.toml"

// defaultImports is what containerd 2 imports when there is no main file
// (its built-in default configuration).
var defaultImports = []string{"/etc/containerd/conf.d/*.toml"}

// Runtime is one runtime handler of containerd's CRI plugin.
type Runtime struct {
	Type string `json:"runtimeType"`
	// BinaryName is the OCI runtime runc-type shims execute; empty means
	// runc from PATH.
	BinaryName string `json:"binaryName,omitempty"`
	// SystemdCgroup is runc's cgroup driver, as the file says: false
	// (cgroupfs) is containerd's default, and the packages'.
	SystemdCgroup bool `json:"systemdCgroup"`
}

// RuntimeConfig is what the stand-in takes from containerd's configuration:
// the parts a pod's sandbox depends on.
type RuntimeConfig struct {
	SandboxImage string
	CNIConfDir   string
	CNIBinDirs   []string
	// DefaultRuntime names the handler of pods without a RuntimeClass.
	DefaultRuntime string
	Runtimes       map[string]Runtime
	// RegistryConfigPath is where hosts.toml files are read from ("" by
	// default: no mirror), as config dump shows it.
	RegistryConfigPath string
	// Files are the configuration files read, main file first.
	Files []string
}

// defaultRuntimeConfig is containerd 2's built-in CRI configuration.
func defaultRuntimeConfig() RuntimeConfig {
	return RuntimeConfig{
		SandboxImage:   DefaultSandboxImage,
		CNIConfDir:     cniconf.ConfDir,
		CNIBinDirs:     []string{cniconf.BinDir},
		DefaultRuntime: "runc",
		Runtimes:       map[string]Runtime{"runc": {Type: "io.containerd.runc.v2"}},
	}
}

// LoadRuntimeConfig reads containerd's main file (path; a missing file
// means the defaults) and every file its imports name, later files
// overriding earlier ones, as containerd merges them.
func LoadRuntimeConfig(path string) (RuntimeConfig, error) {
	rc := defaultRuntimeConfig()
	imports := defaultImports
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		var top map[string]any
		if _, err := toml.Decode(string(data), &top); err != nil {
			return rc, fmt.Errorf("%s: %w", path, err)
		}
		rc.Files = append(rc.Files, path)
		imports = stringList(top["imports"])
		rc.apply(top)
	case !os.IsNotExist(err):
		return rc, err
	}
	for _, pattern := range imports {
		matches, _ := filepath.Glob(pattern)
		sort.Strings(matches)
		for _, f := range matches {
			data, err := os.ReadFile(f)
			if err != nil {
				return rc, err
			}
			var top map[string]any
			if _, err := toml.Decode(string(data), &top); err != nil {
				return rc, fmt.Errorf("%s: %w", f, err)
			}
			rc.Files = append(rc.Files, f)
			rc.apply(top)
		}
	}
	return rc, nil
}

// apply takes one file's settings, in containerd 2's layout (config
// version 3: io.containerd.cri.v1.runtime and .images) and containerd
// 1.x's (io.containerd.grpc.v1.cri).
func (rc *RuntimeConfig) apply(top map[string]any) {
	plugins := table(top["plugins"])
	for _, name := range []string{"io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"} {
		cri := table(plugins[name])
		if s, ok := cri["sandbox_image"].(string); ok && s != "" {
			rc.SandboxImage = s
		}
		cni := table(cri["cni"])
		if s, ok := cni["conf_dir"].(string); ok && s != "" {
			rc.CNIConfDir = s
		}
		if s, ok := cni["bin_dir"].(string); ok && s != "" {
			rc.CNIBinDirs = []string{s}
		}
		if l := stringList(cni["bin_dirs"]); len(l) > 0 {
			rc.CNIBinDirs = l
		}
		if s, ok := table(cri["registry"])["config_path"].(string); ok {
			rc.RegistryConfigPath = s
		}
		ctrd := table(cri["containerd"])
		if s, ok := ctrd["default_runtime_name"].(string); ok && s != "" {
			rc.DefaultRuntime = s
		}
		for handler, v := range table(ctrd["runtimes"]) {
			r := table(v)
			rt := rc.Runtimes[handler]
			if s, ok := r["runtime_type"].(string); ok {
				rt.Type = s
			}
			if s, ok := table(r["options"])["BinaryName"].(string); ok {
				rt.BinaryName = s
			}
			if b, ok := table(r["options"])["SystemdCgroup"].(bool); ok {
				rt.SystemdCgroup = b
			}
			rc.Runtimes[handler] = rt
		}
	}
	images := table(plugins["io.containerd.cri.v1.images"])
	if s, ok := table(images["pinned_images"])["sandbox"].(string); ok && s != "" {
		rc.SandboxImage = s
	}
	if s, ok := table(images["registry"])["config_path"].(string); ok {
		rc.RegistryConfigPath = s
	}
}

func table(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func stringList(v any) []string {
	var out []string
	switch l := v.(type) {
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = l
	}
	return out
}

// sandboxRuntime checks that a pod's runtime handler exists and can start,
// with containerd's errors: an unknown handler is rejected, and a
// runc-type runtime whose binary is missing fails when the shim starts it.
func (rc RuntimeConfig) sandboxRuntime(handler string, exists func(string) bool) error {
	if handler == "" {
		handler = rc.DefaultRuntime
	}
	r, ok := rc.Runtimes[handler]
	if !ok {
		return fmt.Errorf("failed to get sandbox runtime: no runtime for %q is configured", handler)
	}
	if r.BinaryName != "" && !exists(r.BinaryName) {
		return fmt.Errorf("failed to create containerd task: failed to create shim task: OCI runtime create failed: "+
			"unable to start container process: exec: %q: stat %s: no such file or directory: unknown", r.BinaryName, r.BinaryName)
	}
	return nil
}
