// Command homelab declares, renders, builds and rebuilds a highly available
// Kubernetes cluster on a homelab's machines.
package main

import (
	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
)

// The Pulumi engine runs the provider plugin by its name: a link to this
// binary, so users install nothing but homelab (command.Main).
func main() { command.Main(newRootCommand) }

// subcommands registers every command group; each lives in its own file.
var subcommands []func() *cobra.Command

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "homelab",
		Short:         "Build and rebuild a highly available Kubernetes cluster on a homelab",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, c := range subcommands {
		root.AddCommand(c())
	}
	return root
}
