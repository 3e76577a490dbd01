package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// declareGPUWorker declares what a GPU worker gets beyond a plain worker's
// files, join and labels: the pinned nvidia-container-toolkit (a Package
// that restarts containerd when it or the containerd drop-in changed, when
// the user configures containerd, and
// that is skipped, with a warning, on a node where no NVIDIA GPU is
// detected). Workers without an NVIDIA GPU get nothing.
func declareGPUWorker(ctx *pulumi.Context, w pulumi.Resource, cfg Config, r *roles.Rendered, n inventory.Node, conn pulumi.Map, host *HostHandle, nf *nodeFiles) error {
	tk, ok := gpu.ToolkitFor(cfg.Inventory, n)
	if !ok {
		return nil
	}
	args := pulumi.Map{
		"connection":    conn,
		"names":         pulumi.ToStringArray(tk.Packages),
		"pinnedVersion": pulumi.String(tk.Version),
		"repository": pulumi.Map{
			"keyURL":      pulumi.String(tk.KeyURL),
			"keyring":     pulumi.String(tk.Keyring),
			"sourcesPath": pulumi.String(tk.SourcesPath),
			"sources":     pulumi.String(string(tk.Sources)),
		},
		"requireNvidiaGPU": pulumi.Bool(true),
		"declaredGPUs":     pulumi.Int(n.GPUs.Count),
	}
	deps := []pulumi.Resource{host}
	if cfg.Inventory.Cluster.ContainerRuntime.Manage {
		// The NVIDIA runtime is in the managed config.toml, whose
		// containerd Service restarts it: the shim only execs the
		// toolkit's binary, so installing it restarts nothing.
		deps = append(deps, nf.get(containerd.ConfigPath)...)
	} else {
		deps = append(deps, nf.get(gpu.ContainerdDropInPath)...)
		// containerd reads the drop-in only when it starts.
		args["restart"] = pulumi.String(gpu.ContainerdUnit)
		args["trigger"] = pulumi.String(file.Trigger(filesOf(r, n.Name), gpu.ContainerdUnit))
	}
	_, err := register(ctx, "Package", n.Name+":nvidia-container-toolkit", args, &PackageHandle{}, pulumi.Parent(w), pulumi.DependsOn(deps))
	return err
}
