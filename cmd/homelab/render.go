package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/pki"
	"github.com/homelab-dev/homelab/roles/sans"
	"github.com/spf13/cobra"
)

func init() {
	subcommands = append(subcommands, newRenderCommand, newSecretsCommand)
}

func sansOf(inv *inventory.Inventory) sans.Set { return sans.APIServer(inv) }

// clusterDir holds cluster-wide artifacts in a render; the underscore keeps
// it apart from node names (RFC 1123 labels have none).
const clusterDir = "_cluster"

func newRenderCommand() *cobra.Command {
	var path, outDir, layout, secretsPath string
	cmd := &cobra.Command{
		Use:   "render -f FILE -o DIR [--layout vip|single-ip|dns] [--secrets BUNDLE]",
		Short: "Write every file of every node to DIR/<node>/<path on the node>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := loadLayout(path, layout, cmd)
			if err != nil {
				return err
			}
			bundle, err := bundleOrFresh(secretsPath, cmd)
			if err != nil {
				return err
			}
			r, err := roles.Render(inv, bundle)
			if err != nil {
				return err
			}
			count := 0
			for _, nf := range r.Nodes {
				for _, f := range nf.Files {
					if err := writeFile(filepath.Join(outDir, nf.Node.Name), f); err != nil {
						return err
					}
					count++
				}
			}
			for _, f := range r.Cluster {
				if err := writeFile(filepath.Join(outDir, clusterDir), f); err != nil {
					return err
				}
				count++
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rendered %d files for %d nodes into %s (%s layout, endpoint %s)\n",
				count, len(r.Nodes), outDir, inv.Cluster.Endpoint.Layout, inv.Endpoint())
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVarP(&outDir, "output", "o", "", "directory to write into")
	_ = cmd.MarkFlagRequired("output")
	cmd.Flags().StringVar(&layout, "layout", "", "render in this endpoint layout instead of the inventory's: vip, single-ip or dns")
	cmd.Flags().StringVar(&secretsPath, "secrets", "", "secrets bundle from `homelab secrets init` (default: a fresh one, so certificates differ each run)")
	return cmd
}

// loadLayout loads the inventory, optionally switched to another layout and
// validated again in it, so a layout the inventory cannot express (dns
// without dnsName, vip without a VIP) is an error naming the field.
func loadLayout(path, layout string, cmd *cobra.Command) (*inventory.Inventory, error) {
	inv, err := loadInventory(path, cmd.ErrOrStderr())
	if err != nil || layout == "" || layout == inv.Cluster.Endpoint.Layout {
		return inv, err
	}
	inv.Cluster.Endpoint.Layout = layout
	warnings, err := inventory.Validate(inv)
	printWarnings(cmd.ErrOrStderr(), warnings)
	if err != nil {
		return nil, command.Exit(1, fmt.Errorf("in the %s layout: %w", layout, err))
	}
	return inv, nil
}

func bundleOrFresh(path string, cmd *cobra.Command) (*pki.Bundle, error) {
	if path == "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: no --secrets given: using a fresh secrets bundle (CAs and tokens differ on every run; create one with `homelab secrets init`)")
		return pki.New()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return pki.Parse(data)
}

func writeFile(root string, f file.File) error {
	dst := filepath.Join(root, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(dst, f.Content, f.Mode); err != nil {
		return err
	}
	return os.Chmod(dst, f.Mode)
}

func newSecretsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "The cluster's root of trust"}
	var out string
	var force bool
	initCmd := &cobra.Command{
		Use:   "init -o FILE",
		Short: "Generate the cluster's CAs, service-account key, bootstrap token, encryption and VRRP secrets once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s exists; a new bundle means new CAs, which breaks a running cluster. Pass --force to overwrite", out)
			}
			b, err := pki.New()
			if err != nil {
				return err
			}
			if _, err := stack.WriteBundle(out, b); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (0600): keep it secret and backed up; it is the cluster's root of trust\n", out)
			return nil
		},
	}
	initCmd.Flags().StringVarP(&out, "output", "o", "", "where to write the bundle")
	_ = initCmd.MarkFlagRequired("output")
	initCmd.Flags().BoolVar(&force, "force", false, "overwrite an existing bundle")
	cmd.AddCommand(initCmd)
	return cmd
}
