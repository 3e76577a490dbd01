// Command homelab-lab runs the emulated homelab: every inventory node as
// Linux namespaces on this machine, their failures (power, cable,
// hardware, address), drills that measure what compare predicts, and the
// benchmark. It is the emulator's only command: homelab, the provisioner
// users run against their machines, links none of it and reaches the
// lab's nodes only when started inside the lab (homelab-lab exec).
package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/lab/bench"
)

// Drills and the benchmark open stacks, which link the provider plugin to
// this binary: the Pulumi engine runs it by that name (command.Main).
func main() { command.Main(newRootCommand) }

func newBenchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "bench [-workers 4,25] [-runs 3] [-progress] [-kubeadm-log DIR]",
		Short: "Measure a fresh up against its critical path and a sequential kubeadm script, and a no-op up (docs/benchmarks.md)",
		// The benchmark parses its own flags (bench -h lists them).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := bench.Main(args); code != 0 {
				return command.Exit(code, fmt.Errorf("the benchmark exited with %d", code))
			}
			return nil
		},
	}
}
