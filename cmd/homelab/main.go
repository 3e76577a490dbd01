// Command homelab declares, renders, builds and rebuilds a highly available
// Kubernetes cluster on a homelab's machines (and on its emulated homelab).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/stack"

	"github.com/spf13/cobra"
)

func main() {
	// The Pulumi engine runs the provider plugin by this name: a link to
	// this binary, so users install nothing but homelab.
	if filepath.Base(os.Args[0]) == stack.ProviderBinary {
		if err := provider.Serve(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit code (validate: 1 when invalid).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

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
