package cri

import (
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// subcommand is containerd's subcommand in args (config dump), nil when
// args only hold the daemon's flags: a subcommand must never start a
// second server on the node's socket.
func subcommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return args[i:]
		}
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && (name == "address" || name == "a" || name == "config" || name == "c" || name == "pod-state-dir") {
			i++ // the flag's value
		}
	}
	return nil
}

// runSubcommand answers `containerd config dump` as containerd 1.7, the
// release it reports, does (config version 2, its defaults and imports
// merged). The cgroup driver
// is the file's, cgroupfs by default, though the stand-in starts no
// container: a node left at containerd's defaults then fails doctor's
// runtime row as a real one does. Every other subcommand is refused.
func runSubcommand(sub, args []string) int {
	if len(sub) < 2 || sub[0] != "config" || sub[1] != "dump" {
		fmt.Fprintf(os.Stderr, "containerd: %s: the CRI stand-in answers config dump only\n", strings.Join(sub, " "))
		return 1
	}
	path := DefaultConfigPath
	for i, a := range args {
		name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "config" || name == "c") {
			if !ok && i+1 < len(args) {
				val = args[i+1]
			}
			path = val
		}
	}
	rc, err := LoadRuntimeConfig(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %v\n", err)
		return 1
	}
	runtimes := map[string]any{}
	for name, r := range rc.Runtimes {
		opts := map[string]any{"SystemdCgroup": r.SystemdCgroup}
		if r.BinaryName != "" {
			opts["BinaryName"] = r.BinaryName
		}
		runtimes[name] = map[string]any{"runtime_type": r.Type, "options": opts}
	}
	doc := map[string]any{
		"version": 2,
		"plugins": map[string]any{
			"io.containerd.grpc.v1.cri": map[string]any{
				"sandbox_image": rc.SandboxImage,
				"registry":      map[string]any{"config_path": rc.RegistryConfigPath},
				"containerd":    map[string]any{"default_runtime_name": rc.DefaultRuntime, "runtimes": runtimes},
			},
		},
	}
	if err := toml.NewEncoder(os.Stdout).Encode(doc); err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %v\n", err)
		return 1
	}
	return 0
}
