// Command homelab-lab runs the emulated homelab: every inventory node as
// Linux namespaces on this machine, their failures (power, cable,
// hardware, address), drills that measure what compare predicts, and the
// benchmark. It is the emulator's only command: homelab, the provisioner
// users run against their machines, links none of it and reaches the
// lab's nodes only when started inside the lab (homelab-lab exec).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/lab/bench"
	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/stack"
)

func main() {
	// Drills and the benchmark open stacks, which link the provider plugin
	// to this binary: the Pulumi engine runs it by that name.
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

// exitError carries a specific exit code (a command run in the lab: its
// own; a drill that differs from compare: 1; bad flags: 2).
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

func addFileFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "file", "f", "", "inventory file (YAML)")
	_ = cmd.MarkFlagRequired("file")
}

func newBenchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "bench [-workers 4,25] [-runs 3] [-progress] [-kubeadm-log DIR]",
		Short: "Measure a fresh up against its critical path and a sequential kubeadm script, and a no-op up (docs/benchmarks.md)",
		// The benchmark parses its own flags (bench -h lists them).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := bench.Main(args); code != 0 {
				return &exitError{code: code, err: fmt.Errorf("the benchmark exited with %d", code)}
			}
			return nil
		},
	}
}
