package main

import (
	"fmt"
	"io"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/spf13/cobra"
)

func init() {
	subcommands = append(subcommands, newValidateCommand, newSANsCommand)
}

// loadInventory loads and validates the file, printing warnings to w.
func loadInventory(path string, w io.Writer) (*inventory.Inventory, error) {
	return load(inventory.Load, path, w)
}

// loadInventoryWithFiles is loadInventory also checking that the files the
// inventory names exist: for validate and the commands that use them all.
func loadInventoryWithFiles(path string, w io.Writer) (*inventory.Inventory, error) {
	return load(inventory.LoadWithFiles, path, w)
}

func load(loader func(string) (*inventory.Inventory, []*inventory.Problem, error), path string, w io.Writer) (*inventory.Inventory, error) {
	inv, warnings, err := loader(path)
	printWarnings(w, warnings)
	if err != nil {
		return nil, command.Exit(1, err)
	}
	return inv, nil
}

func printWarnings(w io.Writer, warnings []*inventory.Problem) {
	for _, p := range warnings {
		fmt.Fprintf(w, "warning: %s\n", p)
	}
}

func newValidateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check an inventory; exit 0 when valid (warnings printed), 1 when not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := loadInventoryWithFiles(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %d control-plane, %d worker node(s), endpoint %s (%s layout)\n",
				path, len(inv.ControlPlanes()), len(inv.Workers()), inv.Endpoint(), inv.Cluster.Endpoint.Layout)
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	return cmd
}

func newSANsCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "sans -f FILE",
		Short: "Print the API server certificate's SANs: IPs, then DNS names",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			s := sansOf(inv)
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "# IP addresses")
			for _, ip := range s.IPs {
				fmt.Fprintln(out, ip)
			}
			fmt.Fprintln(out, "# DNS names")
			for _, n := range s.DNSNames {
				fmt.Fprintln(out, n)
			}
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	return cmd
}
